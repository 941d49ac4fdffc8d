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
func (b *Board) Until(cond func() bool, limit time.Duration) bool {
	deadline := time.After(limit)
	for {
		ok, changed := b.Check(cond)
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}
