package actors_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
)

type removals struct {
	mu      sync.Mutex
	jobs    int
	batches int
}

// watching is events whose removals r counts.
func watching(r *removals) *actors.Events {
	ev := &actors.Events{}
	ev.JobsRemoved.Subscribe(r.jobsRemoved)
	return ev
}

func (r *removals) jobsRemoved(e actors.JobsRemoved) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs += len(e.Jobs)
	r.batches += e.Batches
}

// TestRetentionRemovesExpiredJobsWithTheirOutputs: a job that finished more than Keep ago goes
// with the output it left in the embedded store; one that finished since, and a queued one, stay
// with theirs.
func TestRetentionRemovesExpiredJobsWithTheirOutputs(t *testing.T) {
	// Heartbeats are not sent here: a lease long enough for the minute the clock moves.
	f := newFixture(t, actors.Config{HeartbeatInterval: 10 * time.Minute, NodeLease: time.Hour})
	n := f.attachTestNode("n1", 1)
	ids := f.queue(f.team, 0, 2)
	finish := func() *persistence.Job {
		a := n.next(t)
		a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: a.msg.Attempt})
		j := f.job(ids[0])
		if a.msg.JobID != ids[0].String() {
			j = f.job(ids[1])
		}
		f.obs.reached(t, j.ID, persistence.JobFinished)
		j = f.job(j.ID)
		if _, err := f.deps.Objects.Put(j.OutputKey(), strings.NewReader("frames"), 100); err != nil {
			t.Fatal(err)
		}
		return j
	}
	expired := finish()
	f.clock.Advance(time.Minute)
	kept := finish()
	queued := f.queue(f.team, 0, 1)[0]
	f.coord.DrainNode("n1")

	seen := &removals{}
	// Thirty days and half a minute after the first job ended: only it is past the cutoff.
	later := clock.NewFake(expired.FinishedAt.Add(30*24*time.Hour + 30*time.Second))
	r := &actors.Retention{Store: f.deps.Store, Clock: later, Events: watching(seen),
		Log: slog.New(slog.DiscardHandler), Keep: 30 * 24 * time.Hour, Every: time.Hour}
	removed, err := r.Sweep(context.Background())
	if err != nil || removed != 1 || seen.jobs != 1 {
		t.Fatalf("sweep removed %d (observed %d), %v; want the expired job", removed, seen.jobs, err)
	}
	if _, err := f.store.Job(expired.ID); err == nil {
		t.Error("the expired job is still stored")
	}
	if _, err := f.store.Job(kept.ID); err != nil {
		t.Errorf("the recent job: %v", err)
	}
	if _, err := f.store.Job(queued); err != nil {
		t.Errorf("the queued job: %v", err)
	}
	// The removal queued the expired job's outputs; the deleter deletes them.
	deleter := &actors.Deleter{Store: f.store, Objects: f.deps.Objects.(*blobs.Store), Clock: later, Log: slog.New(slog.DiscardHandler)}
	if deleted, err := deleter.Pass(); deleted != 1 || err != nil {
		t.Fatalf("the deleter deleted %d, %v; want the expired job's output folder", deleted, err)
	}
	for job, want := range map[*persistence.Job]bool{expired: false, kept: true} {
		if _, err := f.deps.Objects.Head(job.OutputKey()); (err == nil) != want {
			t.Errorf("output of job %s kept %v, want %v", job.ID, err == nil, want)
		}
	}
	if deleted, err := deleter.Pass(); deleted != 0 || err != nil {
		t.Fatalf("a second pass deleted %d, %v", deleted, err)
	}
	if removed, err := r.Sweep(context.Background()); removed != 0 || err != nil {
		t.Fatalf("a second sweep removed %d, %v", removed, err)
	}
}
