//go:build !linux

package main

import "os/exec"

// dieWithTheTest is a no-op where the kernel cannot tie a process's life to its parent's.
func dieWithTheTest(cmd *exec.Cmd) *exec.Cmd { return cmd }
