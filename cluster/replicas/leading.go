package replicas

import (
	"context"
	"log/slog"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// Leadership is what the leader's term loop asks of a replica (*Replica is one).
type Leadership interface {
	// Leadership tells of each change: true when the replica became the leader, false when it
	// no longer is.
	Leadership() <-chan bool
	Term() uint64
	// Barrier waits until every entry committed before it is applied here.
	Barrier(timeout time.Duration) error
	// TransferLeadership hands the leadership to another replica.
	TransferLeadership() error
}

var _ Leadership = (*Replica)(nil)

// Duties start what a leader runs during its term; stop takes them down again. An error leaves
// nothing running.
type Duties func(term uint64) (stop func(), err error)

// LeadOptions tune WhileLeading. Zero values select the defaults in brackets.
type LeadOptions struct {
	// Attempts is how many times duties that cannot start are tried in one term before the
	// replica hands the leadership on [3]; Backoff the wait after the first failure, doubling
	// after each [1s].
	Attempts int
	Backoff  time.Duration
	// Barrier bounds the wait for the entries committed before the term [30s].
	Barrier time.Duration
	Clock   clock.Clock
	Log     *slog.Logger
}

// WhileLeading runs duties for each term this replica leads, until ctx ends. On becoming the
// leader it first applies every entry committed before (a barrier), then starts the duties with
// the term; on losing the leadership they stop at once, before anything else is acted on. Duties
// that cannot start are tried again, Attempts times in all; then the replica hands the
// leadership to another rather than lead without them (writes would fail until the next
// election). A term whose leadership ended while its duties were being tried starts nothing.
func WhileLeading(ctx context.Context, l Leadership, start Duties, o LeadOptions) {
	o = o.withDefaults()
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	changes := l.Leadership()
	for {
		select {
		case <-ctx.Done():
			return
		case leading := <-changes:
			if !leading {
				if stop != nil {
					o.Log.Info("no longer the leader: the duties stop")
					stop()
					stop = nil
				}
				continue
			}
			if stop == nil {
				stop = takeLead(ctx, l, start, o, changes)
			}
		}
	}
}

// takeLead starts the duties of the term just won, trying again after a failure while the
// replica still leads; the duties' stop, or nil when none run.
func takeLead(ctx context.Context, l Leadership, start Duties, o LeadOptions, changes <-chan bool) func() {
	wait := o.Backoff
	for attempt := 1; ; attempt++ {
		term := l.Term() // a leadership lost and won again while waiting is a new term
		err := l.Barrier(o.Barrier)
		if err == nil {
			var stop func()
			if stop, err = start(term); err == nil {
				return stop
			}
		}
		if attempt == o.Attempts {
			o.Log.Error("elected, but the duties cannot start: handing the leadership to another replica", "term", term, "attempts", attempt, "err", err)
			if err := l.TransferLeadership(); err != nil {
				o.Log.Error("cannot hand the leadership on: the duties wait for the next election", "err", err)
			}
			return nil
		}
		o.Log.Warn("elected, but the duties cannot start: trying again", "term", term, "attempt", attempt, "in", wait, "err", err)
		if !waitLeading(ctx, o.Clock, wait, changes) {
			return nil
		}
		wait *= 2
	}
}

// waitLeading waits d, and reports whether the replica still leads then: false as soon as ctx
// ends or the leadership is lost (the change is consumed here; a later one reaches the loop).
func waitLeading(ctx context.Context, clk clock.Clock, d time.Duration, changes <-chan bool) bool {
	done := make(chan struct{})
	timer := clk.AfterFunc(d, func() { close(done) })
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case leading := <-changes:
			if !leading {
				return false
			}
		case <-done:
			return true
		}
	}
}

func (o LeadOptions) withDefaults() LeadOptions {
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Barrier <= 0 {
		o.Barrier = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}
