//go:build !windows

package main

// services is nil: only Windows has a service manager framefarm registers with (Linux runs the
// node through systemd, macOS through launchd).
var services serviceManager
