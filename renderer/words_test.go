package renderer

import "testing"

func TestCountWritesTheNounsNumber(t *testing.T) {
	for n, want := range map[int]string{0: "0 render slots", 1: "1 render slot", 2: "2 render slots"} {
		if got := Count(n, "render slot"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
