package main

import (
	"os/exec"
	"syscall"
)

// dieWithTheTest has the kernel kill a process the tests start when the test binary dies (a
// timeout's panic, a kill): no coordinator or node outlives the run that started it.
func dieWithTheTest(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}
