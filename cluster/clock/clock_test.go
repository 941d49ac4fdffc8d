package clock

import (
	"testing"
	"time"
)

func TestThrottleLetsOneThroughPerPeriod(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	th := Throttle{Period: 10 * time.Second}
	for i, want := range []struct {
		at   time.Duration
		pass bool
		held int
	}{{0, true, 0}, {time.Second, false, 0}, {9 * time.Second, false, 0}, {10 * time.Second, true, 2}, {11 * time.Second, false, 0}, {time.Minute, true, 1}} {
		if pass, held := th.Allow("refused", start.Add(want.at)); pass != want.pass || held != want.held {
			t.Fatalf("event %d at %s: %v %d, want %v %d", i, want.at, pass, held, want.pass, want.held)
		}
	}
	if pass, _ := th.Allow("another kind", start.Add(time.Minute)); !pass {
		t.Fatal("one kind held another back")
	}
}
