package persistence

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/framefarm/framefarm/renderer"
)

func intp(v int) *int { return &v }

// TestAPolicyChangeSetsAndClearsFields: a change replaces the fields it sets, puts those it
// clears back at their default, and leaves the others.
func TestAPolicyChangeSetsAndClearsFields(t *testing.T) {
	pools := []string{"gpu"}
	p := TeamPolicy{Weight: intp(3), MaxRunning: intp(4), Pools: &pools}
	next := p.Patched(PolicyChange{Set: TeamPolicy{MaxQueuedJobs: intp(10), Weight: intp(2)}, Clear: []string{"maxRunning", "pools"}})
	want := TeamPolicy{Weight: intp(2), MaxQueuedJobs: intp(10)}
	if !reflect.DeepEqual(next, want) {
		t.Fatalf("patched %+v, want %+v", next, want)
	}
	if *p.Weight != 3 || *p.MaxRunning != 4 || p.Pools == nil {
		t.Fatalf("the policy patched was changed: %+v", p)
	}
	if next.WeightOrDefault() != 2 || (TeamPolicy{}).WeightOrDefault() != 1 || !next.AllowsPool("any") || p.AllowsPool("cpu") || !p.AllowsPool("gpu") {
		t.Fatal("defaults and pools read wrong")
	}
	none := []string{}
	if (TeamPolicy{Pools: &none}).AllowsPool("gpu") {
		t.Fatal("an empty list of pools allows a pool")
	}
}

// TestQueueCapsRefuseWhatWouldPassThem: with caps on a team's waiting jobs and chunks, a
// creation that would pass one is refused whole, naming the cap; another team is not held; once
// jobs leave the queue there is room again.
func TestQueueCapsRefuseWhatWouldPassThem(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	team := func(name string) ulid.ULID {
		issue := &IssueToken{At: testNow, TeamName: name, NewTeamID: ids.New(testNow), TokenHash: HashToken(name)}
		if err := s.Apply(issue); err != nil {
			t.Fatal(err)
		}
		return issue.Team.ID
	}
	capped, other := team("capped"), team("other")
	set := &SetTeamPolicy{TeamID: capped, Change: PolicyChange{Set: TeamPolicy{MaxQueuedJobs: intp(3), MaxQueuedChunks: intp(4)}}}
	if err := s.Apply(set); err != nil || *set.Team.Policy.MaxQueuedJobs != 3 {
		t.Fatalf("set policy: %v %+v", err, set.Team.Policy)
	}
	job := func(teamID ulid.ULID) *Job {
		return &Job{ID: ids.New(testNow), TeamID: teamID, Kind: KindRender, State: JobQueued, Engine: "lottie"}
	}
	split := func(teamID ulid.ULID, chunks int) []*Job {
		parent := job(teamID)
		parent.State, parent.ChunkFrames = JobPending, 10
		out := []*Job{parent}
		for range chunks {
			out = append(out, &Job{ID: ids.New(testNow), TeamID: teamID, Kind: KindChunk, State: JobQueued, Engine: "lottie", ParentID: parent.ID,
				Spec: JobSpec{Settings: renderer.Settings{Frames: &renderer.Frames{Start: 0, End: 9, Range: true}}}})
		}
		return out
	}
	create := func(jobs ...*Job) error { return s.Apply(&CreateJobs{At: testNow, Jobs: jobs}) }
	if err := create(job(capped), job(capped)); err != nil {
		t.Fatal(err)
	}
	var capErr *QueueCapError
	if err := create(job(capped), job(capped)); !errors.As(err, &capErr) || capErr.Field != "maxQueuedJobs" || capErr.Held != 2 || capErr.Asks != 2 {
		t.Fatalf("two jobs past a cap of 3 with 2 waiting: %v", err)
	}
	if err := create(split(capped, 5)...); !errors.As(err, &capErr) || capErr.Field != "maxQueuedChunks" {
		t.Fatalf("five chunks past a cap of 4: %v", err)
	}
	chunked := split(capped, 4)
	if err := create(chunked...); err != nil {
		t.Fatalf("a split job within both caps: %v", err)
	}
	if got := s.Waiting([]ulid.ULID{capped})[capped]; got != (WaitingCounts{Jobs: 3, Chunks: 4}) {
		t.Fatalf("waiting %+v", got)
	}
	if err := create(job(other), job(other), job(other), job(other)); err != nil {
		t.Fatalf("another team held by the cap: %v", err)
	}
	// A chunk starts rendering: one more chunk fits.
	started := chunked[1].Clone()
	started.State = JobRendering
	if err := s.Apply(&ChangeJob{At: testNow, Prev: JobQueued, Job: started}); err != nil {
		t.Fatal(err)
	}
	if got := s.Waiting([]ulid.ULID{capped})[capped]; got != (WaitingCounts{Jobs: 3, Chunks: 3}) {
		t.Fatalf("waiting after a chunk started %+v", got)
	}
	clear := &SetTeamPolicy{TeamID: capped, Change: PolicyChange{Clear: []string{"maxQueuedJobs"}}}
	if err := s.Apply(clear); err != nil || clear.Team.Policy.MaxQueuedJobs != nil || *clear.Team.Policy.MaxQueuedChunks != 4 {
		t.Fatalf("clear a cap: %v %+v", err, clear.Team.Policy)
	}
	if err := create(split(capped, 1)...); err != nil {
		t.Fatalf("a job without a job cap and a chunk within the chunk cap: %v", err)
	}
	if err := s.Apply(&SetTeamPolicy{TeamID: ids.New(testNow)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a policy for no team: %v", err)
	}
}

// TestUpgradeToSchema7CountsLiveChunks: a store written before chunks were counted gets each
// team's live chunks counted in steps; stopped after the first, the next open goes on.
func TestUpgradeToSchema7CountsLiveChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	team := ids.New(time.Now())
	var jobs []*Job
	for i := range 23 {
		j := &Job{ID: ids.New(time.Now()), TeamID: team, Kind: KindChunk, State: []JobState{JobQueued, JobRendering, JobFinished}[i%3],
			Spec: JobSpec{Settings: renderer.Settings{Frames: &renderer.Frames{Start: 0, End: 9, Range: true}}}}
		if i%4 == 0 {
			j.Kind = KindRender
		}
		jobs = append(jobs, j)
	}
	storeJobs(t, s, jobs)
	want := s.Waiting([]ulid.ULID{team})[team]
	if want.Chunks == 0 {
		t.Fatal("no chunk counted")
	}
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketChunkCounts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("6"))
	})
	s = openAfterAKill(t, path, 4, "6")
	if got := s.Waiting([]ulid.ULID{team})[team]; got != want {
		t.Fatalf("waiting after the upgrade %+v, want %+v", got, want)
	}
}
