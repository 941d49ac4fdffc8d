package persistence

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestRemoveExpiredTakesWhatEndedBeforeTheCutoffAndNothingElse: old terminal top-level jobs go
// with their descendants, logs and emptied batches; recent ones, live ones, children of a living
// parent and parents of living children stay; every counter ends as a store holding only what
// stayed has it.
func TestRemoveExpiredTakesWhatEndedBeforeTheCutoffAndNothingElse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	old, recent := now.Add(-40*24*time.Hour), now.Add(-time.Hour)
	cutoff := now.Add(-30 * 24 * time.Hour)
	team := ids.New(old)
	batchGone, batchKept := ids.New(old), ids.New(old)
	made := 0 // jobs of every priority and tag
	job := func(state JobState, ended time.Time, edit ...func(*Job)) *Job {
		made++
		n := made
		j := &Job{ID: ids.New(old.Add(-time.Hour)), TeamID: team, State: state, Engine: "lottie", Priority: n%3 - 1, Tags: []string{"t", fmt.Sprint("u", n%2)}}
		switch state {
		case JobFinished:
			j.FinishedAt = ended
		case JobFailed, JobCancelled:
			j.ErrorAt = ended
		}
		for _, e := range edit {
			e(j)
		}
		return j
	}
	inBatch := func(b ulid.ULID, i int) func(*Job) { return func(j *Job) { j.BatchID, j.BatchIndex = b, i } }
	oldFinished := job(JobFinished, old)
	oldFailed := job(JobFailed, old)
	oldCancelled := job(JobCancelled, old)
	recentFinished := job(JobFinished, recent)
	oldQueued := job(JobQueued, time.Time{})
	parent := job(JobFinished, old)
	child := job(JobFinished, old, func(j *Job) { j.ParentID, j.Depth = parent.ID, 1 })
	parent.Children = []ulid.ULID{child.ID}
	busyParent := job(JobFailed, old)
	busyChild := job(JobRendering, time.Time{}, func(j *Job) { j.ParentID, j.Depth = busyParent.ID, 1 })
	busyParent.Children = []ulid.ULID{busyChild.ID}
	waitingParent := job(JobPending, time.Time{})
	endedChild := job(JobFinished, old, func(j *Job) { j.ParentID, j.Depth = waitingParent.ID, 1 })
	waitingParent.Children = []ulid.ULID{endedChild.ID}
	goneA, goneB := job(JobFinished, old, inBatch(batchGone, 0)), job(JobCancelled, old, inBatch(batchGone, 1))
	keptA, keptB := job(JobFinished, old, inBatch(batchKept, 0)), job(JobFinished, recent, inBatch(batchKept, 1))
	all := []*Job{oldFinished, oldFailed, oldCancelled, recentFinished, oldQueued, parent, child, busyParent, busyChild,
		waitingParent, endedChild, goneA, goneB, keptA, keptB}
	err := s.update(func(tx *txn) error {
		for _, b := range []ulid.ULID{batchGone, batchKept} {
			if err := tx.putJSON(bucketBatches, id(b), &Batch{ID: b, TeamID: team}); err != nil {
				return err
			}
		}
		for _, j := range all {
			if err := tx.createJob(j, testNow); err != nil {
				return err
			}
			if err := tx.appendLog(j.ID, testNow, "created"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two jobs per step: the steps go on from where the last stopped.
	var removed []ulid.ULID
	batches := 0
	var after []byte
	for step := 0; ; step++ {
		var r Removal
		if err := s.update(func(tx *txn) (err error) { r, err = tx.removeExpired(cutoff, after, 2); return err }); err != nil {
			t.Fatal(err)
		}
		for _, j := range r.Jobs {
			removed = append(removed, j.ID)
		}
		batches += r.Batches
		if r.Next == nil {
			break
		}
		after = r.Next
		if step > 20 {
			t.Fatal("removal does not end")
		}
	}
	want := []ulid.ULID{oldFinished.ID, oldFailed.ID, oldCancelled.ID, parent.ID, child.ID, goneA.ID, goneB.ID, keptA.ID}
	slices.SortFunc(removed, ulid.ULID.Compare)
	slices.SortFunc(want, ulid.ULID.Compare)
	if !slices.Equal(removed, want) || batches != 1 {
		t.Fatalf("removed %v and %d batches, want %v and 1", removed, batches, want)
	}
	err = s.view(func(tx *txn) error {
		for _, j := range all {
			_, err := tx.Job(j.ID)
			if gone := slices.Contains(want, j.ID); (err == nil) == gone {
				t.Errorf("job %s: removed %v, lookup %v", j.ID, gone, err)
			}
			if gone := slices.Contains(want, j.ID); gone && tx.Log(j.ID) != "" {
				t.Errorf("job %s removed with its log left", j.ID)
			}
		}
		if tx.BatchExists(batchGone) || !tx.BatchExists(batchKept) {
			t.Errorf("batches: emptied one exists %v, the other %v", tx.BatchExists(batchGone), tx.BatchExists(batchKept))
		}
		jobs, total, err := tx.ListJobs(JobQuery{TeamID: team, Limit: 100})
		if err != nil || total != len(all)-len(want) || len(jobs) != total {
			t.Errorf("listing after removal: %d of %d, %v; want %d", len(jobs), total, err, len(all)-len(want))
		}
		if n := tx.JobCount(team, JobFinished); n != 3 {
			t.Errorf("%d finished jobs counted, want 3 (recent, child of a waiting parent, recent in a batch)", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var stayed []*Job
	for _, j := range all {
		if !slices.Contains(want, j.ID) {
			stayed = append(stayed, j)
		}
	}
	s.Close()
	fresh := filepath.Join(t.TempDir(), "framefarm.db")
	only := openTestStore(t, fresh)
	storeJobs(t, only, stayed)
	only.Close()
	for _, b := range [][]byte{bucketJobCounts, bucketTagCounts, bucketJobTimeCounts, bucketTagTimeCounts, bucketPriorityTimeCounts, bucketPriorityCounts} {
		if got, want := bucketDump(t, path, b), bucketDump(t, fresh, b); !reflect.DeepEqual(got, want) {
			t.Errorf("%s after removal %v, want %v", b, got, want)
		}
	}
}
