//go:build unix

package aerender

import (
	"os/exec"
	"syscall"
)

// killTree makes cancelling the render kill aerender's whole process group: on macOS aerender
// starts After Effects itself, which must not outlive it.
func killTree(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
