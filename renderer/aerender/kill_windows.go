//go:build windows

package aerender

import (
	"os/exec"
	"strconv"
)

// killTree makes cancelling the render end aerender and the After Effects process it started.
func killTree(cmd *exec.Cmd) {
	cmd.Cancel = func() error {
		return exec.Command("taskkill", "/T", "/F", "/PID", strconv.Itoa(cmd.Process.Pid)).Run()
	}
}
