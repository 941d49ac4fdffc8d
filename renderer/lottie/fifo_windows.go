//go:build windows

package lottie

import "errors"

// errNoFIFO: Windows has no named pipes in the file system, so the Lottie engine runs on Linux
// and macOS nodes (Windows nodes offer After Effects and ffmpeg).
var errNoFIFO = errors.New("the lottie engine needs Unix named pipes: run it on a Linux or macOS node")

func makeFIFO(string) error { return errNoFIFO }

func fifoSupport() error { return errNoFIFO }
