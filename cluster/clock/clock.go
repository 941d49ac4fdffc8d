// Package clock injects time, so that timeouts, leases and retry backoff are tested by moving a
// fake clock instead of sleeping. The coordinator's actors and the render nodes both use it: it
// depends on nothing of either.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// Sleep waits d on clk, or until ctx ends (false).
func Sleep(ctx context.Context, clk Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	woken := make(chan struct{})
	timer := clk.AfterFunc(d, func() { close(woken) })
	select {
	case <-ctx.Done():
		timer.Stop()
		return false
	case <-woken:
		return true
	}
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

func (Real) Now() time.Time { return time.Now() }

func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a clock that moves only when told to. Armed receives a value each time a timer is
// set, so a test can wait until the code under test is waiting before it advances the clock.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	Armed  chan time.Duration
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, Armed: make(chan time.Duration, 1024)}
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	f     func()
	done  bool
}

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	t := &fakeTimer{clock: f, at: f.now.Add(d), f: fn}
	f.timers = append(f.timers, t)
	f.mu.Unlock()
	select {
	case f.Armed <- d:
	default:
	}
	return t
}

// Advance moves the clock forward and fires, in deadline order, every timer now due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	var due []*fakeTimer
	kept := f.timers[:0]
	for _, t := range f.timers {
		switch {
		case t.done:
		case !t.at.After(f.now):
			t.done = true
			due = append(due, t)
		default:
			kept = append(kept, t)
		}
	}
	clear(f.timers[len(kept):])
	f.timers = kept
	f.mu.Unlock()
	sort.SliceStable(due, func(i, k int) bool { return due[i].at.Before(due[k].at) })
	for _, t := range due {
		go t.f()
	}
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.done
	if was {
		// Like a real timer, a stopped one keeps nothing its function holds alive.
		t.f = nil
	}
	t.done = true
	return was
}

// Throttle lets one event of each kind through per period and counts those it holds back: for
// log lines a flood of refused messages would otherwise repeat without end. Kinds are few and
// fixed (the lines a program logs).
type Throttle struct {
	Period time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

// Allow reports whether an event of a kind at now passes, and how many of that kind were held
// back since the last one that did.
func (t *Throttle) Allow(kind string, now time.Time) (pass bool, held int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last, t.held = make(map[string]time.Time), make(map[string]int)
	}
	if last, ok := t.last[kind]; ok && now.Sub(last) < t.Period {
		t.held[kind]++
		return false, 0
	}
	held, t.last[kind] = t.held[kind], now
	delete(t.held, kind)
	return true, held
}
