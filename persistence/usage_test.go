package persistence

import (
	"math"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/renderer"
)

// TestUsageIsCountedAsJobsChange: what a team used is added up in the writes of its jobs'
// changes: every attempt's slot time in the hour it ended (a lost one too), a finished render's
// frames and output, finished and failed jobs (a split job's frames through its chunks); per
// hour, team and engine, after a reopen too; retention removes the hours before its cutoff.
func TestUsageIsCountedAsJobsChange(t *testing.T) {
	path := t.TempDir() + "/framefarm.db"
	s := openTestStore(t, path)
	ids := NewIDs()
	team, other := ids.New(testNow), ids.New(testNow)
	hour := testNow.Truncate(time.Hour)
	at := func(d time.Duration) time.Time { return hour.Add(d) }
	job := &Job{ID: ids.New(hour), TeamID: team, Kind: KindRender, State: JobQueued, Engine: "lottie", Frames: 90}
	chunk := &Job{ID: ids.New(hour), TeamID: team, Kind: KindChunk, State: JobQueued, Engine: "lottie", Frames: 30,
		Spec: JobSpec{Settings: renderer.Settings{Frames: &renderer.Frames{Start: 0, End: 29, Range: true}}}}
	failed := &Job{ID: ids.New(hour), TeamID: other, Kind: KindRender, State: JobQueued, Engine: "ae2026"}
	if err := s.Apply(&CreateJobs{At: at(0), Jobs: []*Job{job, chunk, failed}}); err != nil {
		t.Fatal(err)
	}
	change := func(j *Job, to JobState, when time.Duration, edit func(*Job)) {
		t.Helper()
		prev := j.State
		j.State = to
		if edit != nil {
			edit(j)
		}
		if err := s.Apply(&ChangeJob{At: at(when), Prev: prev, Job: j.Clone()}); err != nil {
			t.Fatal(err)
		}
	}
	started := func(when time.Duration) func(*Job) { return func(j *Job) { j.AttemptStartedAt = at(when) } }
	// The job's first attempt is lost after 10 minutes; its second runs 50 minutes into the next hour.
	change(job, JobRendering, time.Minute, started(time.Minute))
	change(job, JobQueued, 11*time.Minute, nil)
	change(job, JobRendering, 20*time.Minute, started(20*time.Minute))
	change(job, JobFinished, 70*time.Minute, func(j *Job) { j.OutputBytes = 5000 })
	change(chunk, JobRendering, 2*time.Minute, started(2*time.Minute))
	change(chunk, JobFinished, 5*time.Minute, nil)
	change(failed, JobRendering, 3*time.Minute, started(3*time.Minute))
	change(failed, JobFailed, 4*time.Minute, nil)
	s.Close()
	s = openTestStore(t, path)

	byKey := func(records []UsageRecord) map[string]Usage {
		out := map[string]Usage{}
		for _, r := range records {
			out[r.Hour.Format("15")+" "+r.Engine] = r.Usage
		}
		return out
	}
	mine, err := s.Usage(at(0), at(2*time.Hour), team)
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(mine)
	first := got[hour.Format("15")+" lottie"]
	if math.Abs(first.RenderSeconds-13*60) > 0.001 || first.Frames != 30 || first.JobsFinished != 0 {
		t.Fatalf("the first hour: %+v (all: %v)", first, got)
	}
	second := got[hour.Add(time.Hour).Format("15")+" lottie"]
	if math.Abs(second.RenderSeconds-50*60) > 0.001 || second.Frames != 90 || second.JobsFinished != 1 || second.OutputBytes != 5000 {
		t.Fatalf("the second hour: %+v", second)
	}
	all, _ := s.Usage(at(0), at(2*time.Hour), ulid.ULID{})
	if theirs := byKey(all)[hour.Format("15")+" ae2026"]; theirs.JobsFailed != 1 || math.Abs(theirs.RenderSeconds-60) > 0.001 {
		t.Fatalf("the other team's: %+v", theirs)
	}
	if len(all) != 3 {
		t.Fatalf("%d records of every team", len(all))
	}
	if err := s.update(func(tx *txn) error { return tx.pruneUsage(at(time.Hour)) }); err != nil {
		t.Fatal(err)
	}
	if left, _ := s.Usage(at(-24*time.Hour), at(24*time.Hour), ulid.ULID{}); len(left) != 1 || !left[0].Hour.Equal(hour.Add(time.Hour)) {
		t.Fatalf("after retention: %+v", left)
	}
}
