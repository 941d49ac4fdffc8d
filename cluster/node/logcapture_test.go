package node

import (
	"slices"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// TestLogCaptureKeepsEachLinesTime: each line carries the time it was written (pieces of a line
// count when the line ends), and the note of lines left out takes the time of the first kept
// after them.
func TestLogCaptureKeepsEachLinesTime(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	log := newLogCapture(4, clk.Now)
	for _, text := range []string{"one\n", "two\n", "thr", "ee\n", "four\n", "five\n"} {
		clk.Advance(time.Second)
		log.Write([]byte(text))
	}
	lines, at := log.Lines()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := func(s int) int64 { return start.Add(time.Duration(s) * time.Second).UnixMilli() }
	if !slices.Equal(lines, []string{"one", "two", "... 1 lines left out ...", "four", "five"}) ||
		!slices.Equal(at, []int64{ms(1), ms(2), ms(5), ms(5), ms(6)}) {
		t.Fatalf("lines %q at %v", lines, at)
	}
}
