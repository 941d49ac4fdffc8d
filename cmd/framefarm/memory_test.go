package main

import (
	"testing"
	"time"
)

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

// TestReleaseWaitsForMoreWhileTheHeapIsBusy: while collections run, only a large surplus over the
// live heap is released, and not again within the busy gap (a collection forced under load costs
// the intake); once none ran since the last look, a small one is, at once.
func TestReleaseWaitsForMoreWhileTheHeapIsBusy(t *testing.T) {
	const mib = 1 << 20
	m := memoryReleaser{QuietThreshold: 16 * mib, Threshold: 64 * mib, BusyGap: 10 * time.Second}
	for _, tc := range []struct {
		held, live uint64
		quiet      bool
		since      time.Duration
		want       bool
	}{
		{100 * mib, 60 * mib, false, time.Minute, false}, {125 * mib, 60 * mib, false, time.Minute, true},
		{125 * mib, 60 * mib, false, 2 * time.Second, false}, {100 * mib, 60 * mib, true, 2 * time.Second, true},
		{70 * mib, 60 * mib, true, time.Minute, false}, {60 * mib, 60 * mib, true, time.Minute, false},
	} {
		if got := m.releaseDue(tc.held, tc.live, tc.quiet, tc.since); got != tc.want {
			t.Errorf("held %d MiB, live %d MiB, quiet %v, %v after the last: release %v, want %v",
				tc.held/mib, tc.live/mib, tc.quiet, tc.since, got, tc.want)
		}
	}
}
