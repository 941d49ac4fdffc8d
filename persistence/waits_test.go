package persistence

import (
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestAJobsLogShowsTheWaitsOfItsEngine: the reason in force when the job was created and each
// change until it started are placed among its own lines by time; other engines' reasons and
// changes after its start are not; a reason that clears says so.
func TestAJobsLogShowsTheWaitsOfItsEngine(t *testing.T) {
	s := openTestStore(t, "")
	at := func(sec int) time.Time { return testNow.Add(time.Duration(sec) * time.Second) }
	record := func(sec int, changes ...WaitChange) {
		t.Helper()
		if err := s.Apply(&RecordWaits{At: at(sec), Changes: changes}); err != nil {
			t.Fatal(err)
		}
	}
	record(-60, WaitChange{Subject: "ae2026", Reason: "no render node offers the \"ae2026\" engine"}, WaitChange{Subject: "lottie", Reason: "lottie is down"})
	record(-30, WaitChange{Subject: "lottie"})
	record(20, WaitChange{Subject: "ae2026", Reason: "every render node offering the \"ae2026\" engine is draining"})
	record(30, WaitChange{Subject: "ae2026"})
	record(50, WaitChange{Subject: "ae2026", Reason: "after the start"})
	record(60, WaitChange{Subject: "ae2\x00bad", Reason: "never kept"}, WaitChange{Subject: strings.Repeat("e", maxSubject+1), Reason: "never kept"})

	id := ulid.MustNew(ulid.Timestamp(at(0)), nil)
	j := &Job{ID: id, TeamID: id, Engine: "ae2026", State: JobQueued, CreatedAt: at(0), OutputName: "x.mp4"}
	storeJobs(t, s, []*Job{j})
	if err := s.Apply(&AppendJobLog{At: at(0), JobID: id, Lines: []string{"created"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(&AppendJobLog{At: at(40), JobID: id, Lines: []string{"assigned to node n1"}}); err != nil {
		t.Fatal(err)
	}
	stamp := func(sec int) string { return string(appendLogTime(nil, at(sec))) }
	want := strings.Join([]string{
		stamp(0) + " created",
		stamp(0) + ` waiting: no render node offers the "ae2026" engine`,
		stamp(20) + ` waiting: every render node offering the "ae2026" engine is draining`,
		stamp(30) + ` waiting over: a ready render node offers the "ae2026" engine`,
		stamp(40) + " assigned to node n1",
	}, "\n") + "\n"
	j.StartedAt = at(40)
	if got := s.JobLog(j, at(100)); got != want {
		t.Fatalf("log:\n%s\nwant:\n%s", got, want)
	}
	// Still queued: every change until now.
	j.StartedAt = time.Time{}
	if got := s.JobLog(j, at(100)); !strings.HasSuffix(got, stamp(50)+" waiting: after the start\n") {
		t.Fatalf("a job still queued:\n%s", got)
	}
	// Another engine's jobs see their own reasons only; "" before anything was shown says nothing.
	j.Engine = "lottie"
	if got := s.JobLog(j, at(100)); got != stamp(0)+" created\n"+stamp(40)+" assigned to node n1\n" {
		t.Fatalf("a lottie job:\n%s", got)
	}

	latest := s.LatestWaits()
	if len(latest) != 2 || latest["ae2026"] != "after the start" || latest["lottie"] != "" {
		t.Fatalf("latest %q", latest)
	}
	// Pruning keeps each engine's reason in force, and what came after the cutoff.
	if err := s.update(func(tx *txn) error { return tx.pruneWaits(at(25)) }); err != nil {
		t.Fatal(err)
	}
	var kept int
	s.view(func(tx *txn) error {
		kept = tx.bucket(bucketWaits).Stats().KeyN
		return nil
	})
	if kept != 3 || s.LatestWaits()["ae2026"] != "after the start" {
		t.Fatalf("after pruning: %d changes kept, want 3 (lottie's last, ae2026 at 30 and 50)", kept)
	}
}
