// Package aerendertest builds the stand-in aerender program tests use where After Effects is not
// installed (see ../testdata/standin).
package aerendertest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// BuildStandIn compiles the stand-in aerender into a temporary folder and returns its path.
func BuildStandIn(t testing.TB) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(here), "..", "testdata", "standin")
	bin := filepath.Join(t.TempDir(), "aerender")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in aerender: %v\n%s", err, out)
	}
	return bin
}
