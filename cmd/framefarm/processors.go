package main

import (
	"os"
	"runtime"
)

// addDiskProcessor runs the coordinator with one processor more than Go's default (the CPUs
// the process may use). The store's committer spends most of each group commit blocked in
// fdatasync, and Go hands its processor to a request handler meanwhile; back from the disk,
// it waits for a processor behind those handlers, twice a commit, while every request of the
// group waits for it. With a spare processor it goes on at once and the kernel shares the
// CPUs among the threads (the README's "Processors" paragraph has the figures). A GOMAXPROCS
// set in the environment is the operator's choice and is kept. Go then no longer follows a change of the container's CPU limit while it runs:
// the count is taken at start.
func addDiskProcessor() {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
}
