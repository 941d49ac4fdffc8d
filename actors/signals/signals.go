// Package signals lets a test wait for what the actors did instead of sleeping, the way River's
// testsignal does: whoever watches notes each happening on a Board, under its lock, and a test
// waits until a condition over what was noted holds.
package signals

import (
	"sync"
	"time"
)

// Board holds what was noted and wakes those waiting at every note. The zero Board is ready.
type Board struct {
	mu      sync.Mutex
	changed chan struct{}
}

// Note runs change under the board's lock, then wakes every waiter.
func (b *Board) Note(change func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	change()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// Read runs read under the board's lock.
func (b *Board) Read(read func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	read()
}

// Check evaluates cond under the lock and returns, with its answer, a channel closed at the
// next note: a waiter that saw cond false sleeps on it without missing a note.
func (b *Board) Check(cond func() bool) (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return cond(), b.changed
}

// Until waits until cond, evaluated under the lock after each note, holds; false when limit
// passed first.
func (b *Board) Until(cond func() bool, limit time.Duration) bool { return b.wait(cond, 0, limit) }

// UntilQuiet waits until cond holds, as Until, for as long as notes keep coming: it gives up
// when none came for quiet, or when limit passed. Work whose length depends on the machine (a
// render on a loaded one) is waited for as long as it makes progress, and a wait for what will
// never come still ends.
func (b *Board) UntilQuiet(cond func() bool, quiet, limit time.Duration) bool {
	return b.wait(cond, quiet, limit)
}

// quietTimer is the timer a quiet period runs on: time.Timer, or the board's own tests' stand-in.
type quietTimer interface {
	Fired() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

type realTimer struct{ *time.Timer }

func (t realTimer) Fired() <-chan time.Time { return t.C }

// newQuietTimer starts a quiet period's timer.
var newQuietTimer = func(d time.Duration) quietTimer { return realTimer{time.NewTimer(d)} }

// wait waits until cond holds: false once limit passed, or quiet (when not 0) without a note.
func (b *Board) wait(cond func() bool, quiet, limit time.Duration) bool {
	deadline := time.After(limit)
	var idle <-chan time.Time
	var timer quietTimer
	if quiet > 0 {
		timer = newQuietTimer(quiet)
		defer timer.Stop()
		idle = timer.Fired()
	}
	for {
		ok, changed := b.Check(cond)
		if ok {
			return true
		}
		select {
		case <-changed:
			if timer != nil {
				timer.Reset(quiet)
			}
		case <-idle:
			return false
		case <-deadline:
			return false
		}
	}
}
