package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The README's "How it is built" lists the rooms from the top down, each importing only the
// rooms below it (or itself). This holds the code to that table, tests' imports included.
func TestRoomsImportOnlyTheRoomsBelow(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	section = section[strings.Index(section, "## How it is built"):]
	section = section[:strings.Index(section, "The path of a job")]
	floor := map[string]int{}
	for i, m := range regexp.MustCompile("(?m)^\\| `([a-z]+)[/`]").FindAllStringSubmatch(section, -1) {
		floor[m[1]] = i
	}
	if len(floor) != 6 {
		t.Fatalf("the README's rooms table names %d rooms, want 6: %v", len(floor), floor)
	}
	const module = "github.com/framefarm/framefarm/"
	list := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	list.Dir = "../.."
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	roomOf := func(pkg string) (string, bool) {
		rest, ok := strings.CutPrefix(pkg, module)
		if !ok {
			return "", false
		}
		room, _, _ := strings.Cut(rest, "/")
		return room, true
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		room, _ := roomOf(fields[0])
		own, known := floor[room]
		if !known {
			t.Errorf("package %s is in no room of the README's table", fields[0])
			continue
		}
		for _, imp := range fields[1:] {
			if to, ok := roomOf(imp); ok && floor[to] < own {
				t.Errorf("%s (room %s) imports %s, a room above it", fields[0], room, imp)
			}
		}
	}
}
