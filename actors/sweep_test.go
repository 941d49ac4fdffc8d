package actors_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// splitJob creates a split job for the engine "test" waiting on n queued chunks of one frame.
func (f *fixture) splitJob(n int) (parent *persistence.Job, chunks []ulid.ULID) {
	f.t.Helper()
	now := f.clock.Now()
	parent = &persistence.Job{ID: f.ids.New(now), TeamID: f.team, Kind: persistence.KindRender, Engine: "test",
		State: persistence.JobPending, ChunkFrames: 1, OutputName: "split.mp4", CreatedAt: now}
	jobs := []*persistence.Job{parent}
	for i := range n {
		id := f.ids.New(now)
		frames := renderer.Frames{Start: i, End: i}
		jobs = append(jobs, &persistence.Job{ID: id, TeamID: f.team, Kind: persistence.KindChunk, Engine: "test",
			State: persistence.JobQueued, ParentID: parent.ID, Depth: 1, Frames: 1, OutputName: id.String() + ".ts", CreatedAt: now,
			Spec: persistence.JobSpec{Settings: renderer.Settings{Frames: &frames}}})
		parent.Children = append(parent.Children, id)
	}
	if err := f.coord.CreateJobs(jobs, nil); err != nil {
		f.t.Fatal(err)
	}
	return parent, parent.Children
}

// untilEvery waits until every job of ids has been in one of states.
func (f *fixture) untilEvery(ids []ulid.ULID, states ...persistence.JobState) {
	f.t.Helper()
	f.obs.until(f.t, fmt.Sprintf("every chunk in %v", states), func() bool {
		for _, id := range ids {
			if !slices.ContainsFunc(f.obs.states[id], func(s persistence.JobState) bool { return slices.Contains(states, s) }) {
				return false
			}
		}
		return true
	})
}

// untilSwept waits until the store no longer records a sweep of the job's chunks.
func (f *fixture) untilSwept(job ulid.ULID) {
	f.t.Helper()
	for deadline := time.Now().Add(wait); f.store.Meta(persistence.SweepKey(job)) != ""; {
		if time.Now().After(deadline) {
			f.t.Fatalf("the sweep of %s is still recorded", job)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCancellingASplitJobSweepsItsChunks: the cancel answers with the split job alone, once it
// is cancelled; its thousand chunks (many sweep steps) are then cancelled in the background,
// leave the queue, and the sweep's record goes once all are.
func TestCancellingASplitJobSweepsItsChunks(t *testing.T) {
	f := newFixture(t, actors.Config{})
	parent, chunks := f.splitJob(1000)
	f.waitQueued(1000)
	out, err := f.coord.CancelJobs([]ulid.ULID{parent.ID}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Cancelled) != 1 || out.Cancelled[0].ID != parent.ID || out.Cancelled[0].State != persistence.JobCancelled {
		t.Fatalf("the cancel answered %d jobs, the first %+v", len(out.Cancelled), out.Cancelled[0])
	}
	f.untilEvery(chunks, persistence.JobCancelled)
	f.waitQueued(0)
	f.untilSwept(parent.ID)
}

// TestASweepCutShortGoesOnAfterARestart: a split job cancelled just before the coordinator
// stopped (its end durable, its chunks still queued) has its chunks swept by the next start.
func TestASweepCutShortGoesOnAfterARestart(t *testing.T) {
	f := newFixture(t, actors.Config{})
	parent, chunks := f.splitJob(300)
	f.waitQueued(300)
	f.restartWith(func() {
		cancelled := parent.Clone()
		cancelled.State, cancelled.Error = persistence.JobCancelled, "cancelled through the API"
		if err := f.store.Apply(&persistence.ChangeJob{At: f.clock.Now(), Prev: persistence.JobPending, Job: cancelled}); err != nil {
			t.Fatal(err)
		}
		if f.store.Meta(persistence.SweepKey(parent.ID)) == "" {
			t.Fatal("the split job's end recorded no sweep of its chunks")
		}
	})
	f.untilEvery(chunks, persistence.JobCancelled)
	f.waitQueued(0)
	f.untilSwept(parent.ID)
}

// TestAChunkFailingForGoodFailsTheOthers: a chunk whose render fails for good fails its split
// job, and the job's chunks still waiting fail with the job's reason (one that started
// meanwhile is stopped).
func TestAChunkFailingForGoodFailsTheOthers(t *testing.T) {
	f := newFixture(t, actors.Config{NodeLease: time.Hour})
	parent, chunks := f.splitJob(300)
	node := f.attachTestNode("n1", 1)
	first := node.next(t)
	first.reply(&protocol.Failed{JobID: first.msg.JobID, Attempt: first.msg.Attempt, Error: "the layer is missing"})
	f.obs.reached(t, parent.ID, persistence.JobFailed)
	var waiting []ulid.ULID
	for _, id := range chunks {
		if id.String() != first.msg.JobID {
			waiting = append(waiting, id)
		}
	}
	// The chunk that took the freed slot meanwhile is stopped (cancelled); the others fail.
	f.untilEvery(waiting, persistence.JobFailed, persistence.JobCancelled)
	if j := f.job(waiting[len(waiting)-1]); !strings.Contains(j.Error, "parent job "+parent.ID.String()+" failed: ") ||
		!strings.Contains(j.Error, "the layer is missing") {
		t.Fatalf("a waiting chunk failed with %q", j.Error)
	}
	f.untilSwept(parent.ID)
}
