package signals

import (
	"testing"
	"time"
)

// TestBoardWakesWaitersAtEachNote: a waiter sees what another goroutine noted, whenever it was
// noted; a condition that never holds ends at the limit.
func TestBoardWakesWaitersAtEachNote(t *testing.T) {
	var b Board
	count := 0
	go func() {
		for range 3 {
			b.Note(func() { count++ })
		}
	}()
	if !b.Until(func() bool { return count == 3 }, 10*time.Second) {
		t.Fatal("three notes were not seen")
	}
	if b.Until(func() bool { return count == 4 }, 10*time.Millisecond) {
		t.Fatal("a condition nothing made true held")
	}
	ok, changed := b.Check(func() bool { return count == 3 })
	b.Note(func() {})
	select {
	case <-changed:
	default:
		t.Fatal("a note did not close the channel Check gave")
	}
	if !ok {
		t.Fatal("Check read the condition wrong")
	}
}

// heldTimer is a quiet period that runs out only when the test says: its resets are counted.
type heldTimer struct {
	fired  chan time.Time
	resets chan time.Duration
}

func (h *heldTimer) Fired() <-chan time.Time    { return h.fired }
func (h *heldTimer) Reset(d time.Duration) bool { h.resets <- d; return true }
func (h *heldTimer) Stop() bool                 { return true }

// TestUntilQuietWaitsWhileNotesCome: each note starts the quiet period again, so notes keep the
// wait going however long it takes; a quiet period without a note ends it; a limit ends it
// anyway.
func TestUntilQuietWaitsWhileNotesCome(t *testing.T) {
	held := &heldTimer{fired: make(chan time.Time, 1), resets: make(chan time.Duration, 100)}
	newQuietTimer = func(time.Duration) quietTimer { return held }
	t.Cleanup(func() { newQuietTimer = func(d time.Duration) quietTimer { return realTimer{time.NewTimer(d)} } })
	var b Board
	count := 0
	waiting := make(chan struct{}, 1)
	go func() {
		<-waiting // the notes come while the wait goes on
		for range 20 {
			b.Note(func() { count++ })
		}
	}()
	if !b.UntilQuiet(func() bool {
		select {
		case waiting <- struct{}{}:
		default:
		}
		return count >= 20
	}, 50*time.Millisecond, time.Minute) {
		t.Fatal("the wait ended while notes kept coming")
	}
	if len(held.resets) == 0 {
		t.Fatal("no note started the quiet period again")
	}
	for len(held.resets) > 0 {
		if d := <-held.resets; d != 50*time.Millisecond {
			t.Fatalf("the quiet period started again for %s", d)
		}
	}
	if b.UntilQuiet(func() bool { return false }, time.Minute, 30*time.Millisecond) {
		t.Fatal("a condition that never holds held past the limit")
	}
	held.fired <- time.Now()
	if b.UntilQuiet(func() bool { return false }, 30*time.Millisecond, time.Minute) {
		t.Fatal("a condition that never holds held past a quiet period")
	}
}
