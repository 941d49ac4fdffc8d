//go:build !linux && !windows

package s3test

import "syscall"

// procAttr puts the server in a process group of its own.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
