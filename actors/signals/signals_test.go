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
