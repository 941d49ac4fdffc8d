package main

import "testing"

// TestGCPercentKeepsTheHeadroom: a small live heap may grow by the headroom before the next
// collection; a large one keeps Go's default, and the percentage stays within 100 to 1000.
func TestGCPercentKeepsTheHeadroom(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 1000}, {1 * mib, 1000}, {12 * mib, 400}, {48 * mib, 100}, {1024 * mib, 100},
	} {
		if got := gcPercentFor(tc.live, 48*mib); got != tc.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", tc.live/mib, got, tc.want)
		}
	}
}
