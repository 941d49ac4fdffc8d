//go:build !windows

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestNodeServiceIsWindowsOnly: elsewhere `node service` says so, and names what runs a node
// there, before it reads any flag.
func TestNodeServiceIsWindowsOnly(t *testing.T) {
	for _, args := range [][]string{{"node", "service", "install", "--data-dir", "relative"}, {"node", "service", "start"}, {"node", "service"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr, plugins{}); code == 0 ||
			!strings.Contains(stderr.String(), "registers a Windows service; on Linux the framefarm-node systemd unit") {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
}
