package node

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// TestLogCaptureHandsEachLineOnce: progress reports carry the finished lines written since the
// last one; the final report the rest, the unfinished last line included.
func TestLogCaptureHandsEachLineOnce(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	log := newLogCapture(100, clk.Now)
	log.Write([]byte("frame 1\nframe 2\nfra"))
	if lines, _ := log.Finished(); !slices.Equal(lines, []string{"frame 1", "frame 2"}) {
		t.Fatalf("first report %q", lines)
	}
	if lines, _ := log.Finished(); lines != nil {
		t.Fatalf("nothing new, yet %q", lines)
	}
	log.Write([]byte("me 3\nuploading"))
	if lines, _ := log.Finished(); !slices.Equal(lines, []string{"frame 3"}) {
		t.Fatalf("second report %q", lines)
	}
	if lines, _ := log.Lines(); !slices.Equal(lines, []string{"uploading"}) {
		t.Fatalf("the final report %q", lines)
	}
}

func TestLogCaptureCutsAnOverlongLine(t *testing.T) {
	log := newLogCapture(10, time.Now)
	log.Write([]byte(strings.Repeat("é", maxLineBytes) + "\nshort\n"))
	lines, _ := log.Finished()
	if len(lines) != 2 || len(lines[0]) > maxLineBytes+4 || !strings.HasSuffix(lines[0], " ...") || !utf8.ValidString(lines[0]) || lines[1] != "short" {
		t.Fatalf("lines %d, first %d bytes", len(lines), len(lines[0]))
	}
}
