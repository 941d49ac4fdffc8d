//go:build unix

package lottie

import "syscall"

// makeFIFO makes the named pipe frames travel through from the worker to ffmpeg.
func makeFIFO(path string) error { return syscall.Mkfifo(path, 0o600) }

func fifoSupport() error { return nil }
