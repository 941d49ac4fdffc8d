package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

func TestEveryCommandAnswersHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // a line of the help, a flag for commands with flags
	}{
		{[]string{"serve", "--help"}, "-local-slots"},
		{[]string{"node", "-h"}, "-require-tags"},
		{[]string{"--help"}, "[--pools gpu,4k]"},
		{[]string{"team", "--help"}, "framefarm team create NAME"},
		{[]string{"team", "create", "--help"}, "-admin-token"},
		{[]string{"limit", "--help"}, "framefarm limit list | set NAME COUNT | delete NAME"},
		{[]string{"limit", "set", "--help"}, "-admin-token"},
		{[]string{"usage", "--help"}, "-since"},
		{[]string{"node", "list", "--help"}, "-admin-token"},
		{[]string{"token", "--help"}, "framefarm token revoke"},
		{[]string{"token", "create", "--help"}, "-expires"},
		{[]string{"cluster", "--help"}, "framefarm cluster tls cert create"},
		{[]string{"cluster", "tls", "ca", "create", "-help"}, "-days"},
		{[]string{"ha", "--help"}, "framefarm ha status"},
		{[]string{"ha", "join", "--help"}, "-address"},
		{[]string{"ha", "init", "--help"}, "-replicas"},
		{[]string{"ha", "balance", "--help"}, "-check-interval"},
		{[]string{"objects", "copy", "--help"}, "-parallel"},
		{[]string{"--help"}, "framefarm COMMAND --help"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr, plugins{})
		if code != 0 || stderr.Len() > 0 || !strings.HasPrefix(stdout.String(), "usage:") || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s", tc.args, code, stderr.String(), stdout.String())
		}
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stdout, &stderr, plugins{}); code != 0 || !strings.HasPrefix(stdout.String(), "framefarm ") {
		t.Fatalf("--version: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
}

// A build says its version, commit and date: those its release set, else those Go stamped.
func TestABuildSaysItsCommitAndDate(t *testing.T) {
	stamped := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-11-28T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := describeBuild(stamped), "framefarm dev-0123456789ab (commit 0123456789abcdef0123, with changes not committed, 2026-11-28T10:00:00Z)"; got != want {
		t.Errorf("a stamped build: %q, want %q", got, want)
	}
	if got := describeBuild(nil); got != "framefarm dev (commit not known)" {
		t.Errorf("a build without information: %q", got)
	}
	version, commit, date = "v1.2.3", "fedcba98", "2026-12-01T00:00:00Z"
	defer func() { version, commit, date = "dev", "", "" }()
	if got, want := describeBuild(stamped), "framefarm v1.2.3 (commit fedcba98, 2026-12-01T00:00:00Z)"; got != want {
		t.Errorf("a release: %q, want %q", got, want)
	}
}

func TestAnUnknownFlagSaysWhereHelpIs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--bogus"}, &stdout, &stderr, plugins{})
	if code != 1 || stdout.Len() > 0 || stderr.String() != "framefarm: flag provided but not defined: -bogus\nframefarm serve --help lists its flags\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
