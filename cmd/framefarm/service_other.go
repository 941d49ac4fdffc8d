//go:build !windows

package main

import "errors"

var errNoWindowsService = errors.New("framefarm node service registers a Windows service; on Linux the framefarm-node systemd unit of the Debian package runs a node, on macOS the launchd agent of the macOS tarball")

func installService(serviceInstall) error { return errNoWindowsService }

func controlService(name, verb string) error { return errNoWindowsService }

func runAsService(name string, ns nodeSettings, p plugins) error { return errNoWindowsService }
