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

// TestUntilQuietWaitsWhileNotesCome: notes coming faster than the quiet period keep the wait
// going past it; once they stop, the wait ends a quiet period later; a limit ends it anyway.
func TestUntilQuietWaitsWhileNotesCome(t *testing.T) {
	var b Board
	count := 0
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				b.Note(func() { count++ })
			}
		}
	}()
	// Twenty notes take at least 100 ms, far past the 50 ms quiet period.
	if !b.UntilQuiet(func() bool { return count >= 20 }, 50*time.Millisecond, time.Minute) {
		t.Fatal("the wait ended while notes kept coming")
	}
	if b.UntilQuiet(func() bool { return false }, time.Minute, 30*time.Millisecond) {
		t.Fatal("a condition that never holds held")
	}
	close(stop)
	if b.UntilQuiet(func() bool { return false }, 30*time.Millisecond, time.Minute) {
		t.Fatal("a condition that never holds held")
	}
}
