package replicas

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// fakeLeadership is a replica's leadership driven by the test; every call is recorded.
type fakeLeadership struct {
	changes chan bool
	mu      sync.Mutex
	term    uint64
	// barrierErr fails the next barriers; transfers counts the leadership handed on.
	barrierErr error
	transfers  int
	calls      chan string
}

func newFakeLeadership() *fakeLeadership {
	return &fakeLeadership{changes: make(chan bool, 10), calls: make(chan string, 100)}
}

func (f *fakeLeadership) Leadership() <-chan bool { return f.changes }
func (f *fakeLeadership) Term() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term
}
func (f *fakeLeadership) Barrier(time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls <- "barrier"
	return f.barrierErr
}
func (f *fakeLeadership) TransferLeadership() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transfers++
	f.calls <- "transfer"
	return nil
}

// win makes the replica the leader of a new term.
func (f *fakeLeadership) win(term uint64) {
	f.mu.Lock()
	f.term = term
	f.mu.Unlock()
	f.changes <- true
}

// duties records each start and stop, failing the first failures starts.
type duties struct {
	failures int
	events   chan string
}

func (d *duties) start(term uint64) (func(), error) {
	if d.failures > 0 {
		d.failures--
		d.events <- "failed"
		return nil, errors.New("a duty cannot start")
	}
	d.events <- "started"
	return func() { d.events <- "stopped" }, nil
}

func next(t *testing.T, ch chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", want)
	}
}

// run starts WhileLeading on a fake clock; it ends with the test.
func run(t *testing.T, l *fakeLeadership, d *duties, clk *clock.Fake) (stopped chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped = make(chan struct{})
	go func() {
		defer close(stopped)
		WhileLeading(ctx, l, d.start, LeadOptions{Attempts: 3, Backoff: time.Second, Clock: clk})
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	return stopped
}

// waitArmed waits until a timer of d is set on the fake clock.
func waitArmed(t *testing.T, clk *clock.Fake, d time.Duration) {
	t.Helper()
	for {
		select {
		case armed := <-clk.Armed:
			if armed == d {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s timer was set", d)
		}
	}
}

// advanceWhenWaiting moves the fake clock on by d once a timer waits for it.
func advanceWhenWaiting(t *testing.T, clk *clock.Fake, d time.Duration) {
	t.Helper()
	waitArmed(t, clk, d)
	clk.Advance(d)
}

// TestDutiesRunWhileLeading: duties start once the term's barrier passed, stop when the
// leadership is lost, and start again for the next term.
func TestDutiesRunWhileLeading(t *testing.T) {
	l, d := newFakeLeadership(), &duties{events: make(chan string, 10)}
	run(t, l, d, clock.NewFake(time.Unix(0, 0)))
	l.win(2)
	next(t, l.calls, "barrier")
	next(t, d.events, "started")
	l.changes <- false
	next(t, d.events, "stopped")
	l.win(4)
	next(t, l.calls, "barrier")
	next(t, d.events, "started")
}

// TestDutiesThatCannotStartHandTheLeadershipOn: duties failing to start are tried again after
// a backoff, and after the last attempt the replica hands the leadership to another rather than
// lead without them.
func TestDutiesThatCannotStartHandTheLeadershipOn(t *testing.T) {
	l, d := newFakeLeadership(), &duties{failures: 3, events: make(chan string, 10)}
	clk := clock.NewFake(time.Unix(0, 0))
	run(t, l, d, clk)
	l.win(2)
	next(t, d.events, "failed")
	advanceWhenWaiting(t, clk, time.Second)
	next(t, d.events, "failed")
	advanceWhenWaiting(t, clk, 2*time.Second)
	next(t, d.events, "failed")
	for _, want := range []string{"barrier", "barrier", "barrier", "transfer"} {
		next(t, l.calls, want)
	}
	// Elected again, they start.
	l.changes <- false
	l.win(5)
	next(t, d.events, "started")
}

// TestABarrierThatFailsIsTriedAgain: the term's barrier failing (entries not applied in time)
// counts as duties that cannot start; one retry later they start.
func TestABarrierThatFailsIsTriedAgain(t *testing.T) {
	l, d := newFakeLeadership(), &duties{events: make(chan string, 10)}
	l.barrierErr = errors.New("timed out")
	clk := clock.NewFake(time.Unix(0, 0))
	run(t, l, d, clk)
	l.win(2)
	next(t, l.calls, "barrier")
	l.mu.Lock()
	l.barrierErr = nil
	l.mu.Unlock()
	advanceWhenWaiting(t, clk, time.Second)
	next(t, l.calls, "barrier")
	next(t, d.events, "started")
}

// TestALeadershipLostWhileRetryingStartsNothing: the leadership lost during the wait between
// two attempts ends the attempts, nothing is handed on, and the next term starts afresh.
func TestALeadershipLostWhileRetryingStartsNothing(t *testing.T) {
	l, d := newFakeLeadership(), &duties{failures: 1, events: make(chan string, 10)}
	clk := clock.NewFake(time.Unix(0, 0))
	run(t, l, d, clk)
	l.win(2)
	next(t, d.events, "failed")
	waitArmed(t, clk, time.Second)
	l.changes <- false
	l.win(3)
	next(t, l.calls, "barrier")
	next(t, l.calls, "barrier")
	next(t, d.events, "started")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.transfers != 0 {
		t.Fatalf("the leadership was handed on %d times", l.transfers)
	}
}
