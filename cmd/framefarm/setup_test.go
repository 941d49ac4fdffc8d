package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupWaitsForAnotherAptGet: make setup, with Debian packages to install while another
// apt-get holds the lock (unattended-upgrades does, on render machines), waits for it rather
// than give up: every apt-get it runs carries DPkg::Lock::Timeout. The system's dpkg, apt-get and
// the tools setup runs after them are stood in for, so nothing is installed.
func TestSetupWaitsForAnotherAptGet(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "apt-get.calls")
	script := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script("dpkg", "exit 1") // no package installed
	script("apt-get", `echo "$*" >> `+calls)
	script("go", "exit 0")
	script("npm", "exit 0")
	script("node", "exit 0")
	cmd := exec.Command("make", "-s", "-C", "../..", "setup", "SUDO=", "GO="+filepath.Join(bin, "go"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make setup: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("make setup ran no apt-get: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 {
		t.Fatalf("apt-get ran %d times, want an update and an install: %q", len(lines), lines)
	}
	for _, line := range lines {
		if !strings.Contains(line, "DPkg::Lock::Timeout=") {
			t.Errorf("apt-get %s: gives up at once when another holds the lock", line)
		}
	}
}
