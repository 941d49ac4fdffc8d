package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// Retention removes finished, failed and cancelled jobs that ended more than Keep ago, with
// their descendants, logs and emptied batches; the same write queues their outputs in the
// farm's object store for the Deleter (outputs uploaded to a client's own bucket are never
// touched). It works in small steps, each one group-committed write of at most StepJobs jobs,
// so intake never waits behind it.
type Retention struct {
	Store  Store
	Clock  clock.Clock
	Events *Events
	Log    *slog.Logger
	// Keep is how long a job is kept after it ended; Every is the wait between sweeps.
	Keep, Every time.Duration
	// StepJobs caps the top-level jobs one write removes (default 256).
	StepJobs int
}

// Run sweeps at once and then every Every, until ctx ends.
func (r *Retention) Run(ctx context.Context) {
	for {
		if _, err := r.Sweep(ctx); err != nil {
			r.Log.Error("retention sweep failed; the next sweep tries again", "err", err)
		}
		next := make(chan struct{})
		timer := r.Clock.AfterFunc(r.Every, func() { close(next) })
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-next:
		}
	}
}

// Sweep removes every job that has expired now and reports how many it removed.
func (r *Retention) Sweep(ctx context.Context) (int, error) {
	step := r.StepJobs
	if step <= 0 {
		step = 256
	}
	cutoff := r.Clock.Now().Add(-r.Keep)
	var after []byte
	removed := 0
	for ctx.Err() == nil {
		command := &persistence.RemoveExpired{Cutoff: cutoff, After: after, Max: step}
		if err := r.Store.Apply(command); err != nil {
			return removed, err
		}
		res := command.Removal
		if len(res.Jobs) > 0 || res.Batches > 0 {
			r.Events.JobsRemoved.Publish(JobsRemoved{Jobs: res.Jobs, Batches: res.Batches})
		}
		removed += len(res.Jobs)
		if res.Next == nil {
			break
		}
		after = res.Next
	}
	if removed > 0 {
		r.Log.Info("retention removed jobs that ended before the cutoff", "jobs", removed, "cutoff", cutoff)
	}
	// Answers kept for Idempotency-Keys go after a day, whatever the jobs' retention.
	forget := &persistence.ForgetAnswers{Before: r.Clock.Now().Add(-persistence.AnswerTTL), Max: 4 * step}
	for ctx.Err() == nil {
		if err := r.Store.Apply(forget); err != nil {
			return removed, err
		}
		if forget.Next == nil {
			break
		}
		forget.After = forget.Next
	}
	return removed, nil
}
