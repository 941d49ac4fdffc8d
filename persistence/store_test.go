package persistence

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// createJob stores a new job and its index entries, as CreateJobs does without the log line.
func (t *txn) createJob(j *Job, at time.Time) error {
	return t.insertJob(j, prepareJob(j, at))
}

// storeJobs creates the jobs in one transaction.
func storeJobs(t *testing.T, s *Store, jobs []*Job) {
	t.Helper()
	if err := s.update(func(tx *txn) error {
		for _, j := range jobs {
			if err := tx.createJob(j, testNow); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func openTestStore(t *testing.T, path string) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "framefarm.db")
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestGroupCommitAnswersEachWriterAndSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s, err := Open(path, Options{MaxBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	ids := NewIDs()
	team := ids.New(time.Now())
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	results := make([]error, 300)
	jobIDs := make([]ulid.ULID, 300)
	for i := range results {
		jobIDs[i] = ids.New(time.Now())
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.update(func(tx *txn) error {
				if err := tx.createJob(&Job{ID: jobIDs[i], TeamID: team, State: JobQueued}, testNow); err != nil {
					return err
				}
				if i%50 == 7 {
					return errBoom // after writing: the batch must roll back and replay without it
				}
				return nil
			})
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, path)
	err = s.view(func(tx *txn) error {
		for i, res := range results {
			_, getErr := tx.Job(jobIDs[i])
			if i%50 == 7 {
				if !errors.Is(res, errBoom) || !errors.Is(getErr, ErrNotFound) {
					return fmt.Errorf("write %d: result %v, stored %v; want its own error and nothing stored", i, res, getErr)
				}
				continue
			}
			if res != nil || getErr != nil {
				return fmt.Errorf("write %d: result %v, stored %v", i, res, getErr)
			}
		}
		if got := tx.JobCount(team, JobQueued); got != 294 {
			return fmt.Errorf("queued count %d, want 294", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCreationsCommitInIDOrder: within a group commit, job creations take the places creations
// held, in id order; every other write keeps its place.
func TestCreationsCommitInIDOrder(t *testing.T) {
	ids := NewIDs()
	first, second, third := ids.New(testNow), ids.New(testNow), ids.New(testNow)
	other := func(name string) *write {
		return &write{done: func(error) {}, fn: func(*txn) error { return errors.New(name) }}
	}
	a, b := other("a"), other("b")
	batch := []*write{{creates: third}, a, {creates: first}, b, {creates: second}}
	inIDOrder(batch)
	got := []ulid.ULID{batch[0].creates, batch[2].creates, batch[4].creates}
	if !slices.Equal(got, []ulid.ULID{first, second, third}) || batch[1] != a || batch[3] != b {
		t.Fatalf("order after sorting: %v, others in place %v %v", got, batch[1] == a, batch[3] == b)
	}
	// One caller's ids follow each other, whoever else asks meanwhile.
	var run, others []ulid.ULID
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 1000 {
			others = append(others, ids.New(testNow))
		}
	})
	ids.Run(testNow, func(next func() ulid.ULID) {
		for range 1000 {
			run = append(run, next())
		}
	})
	wg.Wait()
	all := slices.SortedFunc(slices.Values(append(slices.Clone(run), others...)), ulid.ULID.Compare)
	start := slices.Index(all, run[0])
	if !slices.Equal(all[start:start+len(run)], run) {
		t.Fatal("another caller's ids came between the ids of one Run")
	}
}

// TestABurstOfIDsSpreadsOverMilliseconds: at most 64 ids share a millisecond, a burst takes the
// following ones, and the clock takes over again once it passes them.
func TestABurstOfIDsSpreadsOverMilliseconds(t *testing.T) {
	ids := NewIDs()
	perMs := map[uint64]int{}
	var last ulid.ULID
	ids.Run(testNow, func(next func() ulid.ULID) {
		for range 1000 {
			id := next()
			if id.Compare(last) <= 0 {
				t.Fatal("ids do not increase")
			}
			last = id
			perMs[id.Time()]++
		}
	})
	start := ulid.Timestamp(testNow)
	for ms := start; ms < start+15; ms++ {
		if perMs[ms] != 64 {
			t.Fatalf("%d ids at ms %d, want 64", perMs[ms], ms-start)
		}
	}
	if perMs[start+15] != 1000-15*64 || len(perMs) != 16 {
		t.Fatalf("ids per millisecond: %v", perMs)
	}
	if later := ids.New(testNow.Add(time.Second)); later.Time() != start+1000 {
		t.Fatalf("after the burst, an id is stamped %d ms after it began, want the clock's 1000", later.Time()-start)
	}
}

func TestUpdateAfterCloseFails(t *testing.T) {
	s := openTestStore(t, "")
	s.Close()
	if err := s.update(func(*txn) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

func TestSecondOpenReportsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	openTestStore(t, path)
	_, err := Open(path, Options{OpenTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
}

// TestListJobsMatchesReference checks every filter and order against a plain filter-and-sort over
// all records, on random data and random queries.
func TestListJobsMatchesReference(t *testing.T) {
	// Jobs over 1.5 s (many per counter unit, tags sharing milliseconds) and over 17 hours
	// (units of every level).
	for _, step := range []time.Duration{time.Millisecond, 41 * time.Second} {
		t.Run(step.String(), func(t *testing.T) { listJobsMatchesReference(t, step) })
	}
}

// referenceTemplates are the templates of the reference jobs (the zero id: a join, no template).
var referenceTemplates = []ulid.ULID{{}, {1}, {2}}

// referenceJobs stores 600 random jobs of two teams, created over 1,500 steps, with random states,
// priorities (half of them shared, half nearly each its own) and tags, 200 of them moved to
// another state afterwards and the queued and pending among 100 more given other priorities and
// tags, so indexes see updates too.
func referenceJobs(tb testing.TB, s *Store, step time.Duration) (teams [2]ulid.ULID, base time.Time, tags []string, all []*Job) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := NewIDs()
	teams = [2]ulid.ULID{ids.New(time.Now()), ids.New(time.Now())}
	base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tags = []string{"red", "green", "blue", "a-b_c"}
	err := s.update(func(tx *txn) error {
		for i := range 600 {
			created := base.Add(time.Duration(rng.IntN(1500))*step + time.Duration(rng.IntN(int(step/time.Millisecond)))*time.Millisecond)
			j := &Job{
				ID:         ulid.MustNew(ulid.Timestamp(created), ulid.DefaultEntropy()),
				TeamID:     teams[i%2],
				TemplateID: referenceTemplates[rng.IntN(len(referenceTemplates)+1)%len(referenceTemplates)],
				State:      AllJobStates[rng.IntN(len(AllJobStates))],
				Priority:   []int{rng.IntN(5) - 2, rng.IntN(20001) - 10000}[rng.IntN(2)], // few priorities, and many over blocks of them
				CreatedAt:  time.UnixMilli(int64(ulid.Timestamp(created))).UTC(),
			}
			for _, tag := range tags {
				if rng.IntN(3) == 0 {
					j.Tags = append(j.Tags, tag)
				}
			}
			if err := tx.createJob(j, testNow); err != nil {
				return err
			}
			all = append(all, j)
		}
		for _, j := range all[:200] {
			prev := j.State
			j.State = AllJobStates[rng.IntN(len(AllJobStates))]
			if err := tx.updateJob(prev, j, testNow); err != nil {
				return err
			}
		}
		// Queued and pending jobs given other priorities and tags (RetagJob).
		for i, j := range all[200:300] {
			retag := &RetagJob{At: testNow, JobID: j.ID, Priority: rng.IntN(5) - 2, Tags: slices.Clone(tags[rng.IntN(len(tags)):]), Line: "retagged"}
			changed, err := tx.retagJob(retag)
			if err != nil {
				return err
			}
			if (changed != nil) != (j.State == JobQueued || j.State == JobPending) {
				return fmt.Errorf("a %s job retagged: %v", j.State, changed != nil)
			}
			if changed != nil {
				all[200+i] = changed
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return teams, base, tags, all
}

// checkListing compares a listing (not in random order) with filtering and sorting every job.
func checkListing(t *testing.T, s *Store, all []*Job, q JobQuery) {
	t.Helper()
	want := referenceList(all, q)
	var got []*Job
	var total int
	if err := s.view(func(tx *txn) (err error) { got, total, err = tx.ListJobs(q); return err }); err != nil {
		t.Fatal(err)
	}
	wantPage := want[min(q.Offset, len(want)):min(len(want), max(q.Offset, 0)+max(q.Limit, 0))]
	if total != len(want) || !slices.EqualFunc(got, wantPage, func(a, b *Job) bool { return a.ID == b.ID }) {
		t.Fatalf("query %+v:\ngot total %d %v\nwant total %d %v", q, total, jobIDsOf(got), len(want), jobIDsOf(wantPage))
	}
}

func listJobsMatchesReference(t *testing.T, step time.Duration) {
	s := openTestStore(t, "")
	rng := rand.New(rand.NewPCG(3, 4))
	teams, base, tags, all := referenceJobs(t, s, step)
	teamA, teamB := teams[0], teams[1]
	// Pickup order at every offset, where pages start in each priority, block of priorities and
	// the default's jobs.
	for _, q := range []JobQuery{{TeamID: teamA}, {TeamID: teamA, Tags: []string{"red"}}, {TeamID: teamB, States: []JobState{JobQueued, JobFinished}}} {
		q.Sort, q.Limit = SortPriority, 3
		for q.Offset = 0; q.Offset <= len(all)/2; q.Offset++ {
			checkListing(t, s, all, q)
		}
	}
	// One template's jobs, in creation order either way, with states and times.
	for range 100 {
		q := JobQuery{TeamID: teamB, Template: referenceTemplates[1+rng.IntN(2)], Offset: rng.IntN(120), Limit: 1 + rng.IntN(40),
			Sort: []JobSort{SortOldestFirst, SortNewestFirst}[rng.IntN(2)]}
		if rng.IntN(2) == 0 {
			q.States = []JobState{JobQueued, AllJobStates[rng.IntN(len(AllJobStates))]}
		}
		if rng.IntN(2) == 0 {
			q.CreatedFrom = base.Add(time.Duration(rng.IntN(1500)) * step)
		}
		checkListing(t, s, all, q)
	}
	for range 400 {
		// Offsets up to past the team's jobs: into every priority's segment.
		q := JobQuery{TeamID: teamA, Offset: []int{rng.IntN(40), rng.IntN(320)}[rng.IntN(2)], Limit: 1 + rng.IntN(60), Sort: []JobSort{SortOldestFirst, SortNewestFirst, SortPriority}[rng.IntN(3)]}
		if rng.IntN(2) == 0 {
			q.CreatedFrom = base.Add(time.Duration(rng.IntN(1500))*step + time.Duration(rng.IntN(1000))*time.Microsecond)
		}
		if rng.IntN(2) == 0 {
			q.CreatedTo = base.Add(time.Duration(rng.IntN(1500)) * step)
		}
		for _, st := range AllJobStates {
			if rng.IntN(3) == 0 {
				q.States = append(q.States, st)
			}
		}
		for _, tag := range append(tags, "none") { // no job carries "none"
			if rng.IntN(4) == 0 {
				q.Tags = append(q.Tags, tag)
			}
		}
		checkListing(t, s, all, q)
	}
	// Random order, with states and with a tag: the right set, whatever the order; a page
	// smaller than the matches: distinct matching jobs, and every match drawn at some point.
	for _, q := range []JobQuery{
		{TeamID: teamB, Limit: 1000, Sort: SortRandom, States: []JobState{JobQueued, JobFinished}},
		{TeamID: teamB, Limit: 1000, Sort: SortRandom, Tags: []string{"red"}},
		{TeamID: teamB, Limit: 1000, Sort: SortRandom, Tags: []string{"red", "blue"}, States: []JobState{JobQueued, JobFinished, JobCancelled}},
	} {
		var got []*Job
		var total int
		if err := s.view(func(tx *txn) (err error) { got, total, err = tx.ListJobs(q); return err }); err != nil {
			t.Fatal(err)
		}
		want := referenceList(all, q)
		gotIDs, wantIDs := jobIDsOf(got), jobIDsOf(want)
		slices.Sort(gotIDs)
		slices.Sort(wantIDs)
		if total != len(want) || !slices.Equal(gotIDs, wantIDs) {
			t.Fatalf("random listing %+v: got %d jobs (total %d), want %d", q, len(got), total, len(want))
		}
		q.Limit = 10
		if len(q.Tags) == 0 {
			q.CreatedFrom = base.Add(300 * step)
		}
		want = referenceList(all, q)
		drawn := map[string]bool{}
		for range 200 {
			if err := s.view(func(tx *txn) (err error) { got, total, err = tx.ListJobs(q); return err }); err != nil {
				t.Fatal(err)
			}
			ids := jobIDsOf(got)
			if total != len(want) || len(ids) != 10 || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 10 {
				t.Fatalf("random page %v of %+v (total %d, want %d)", ids, q, total, len(want))
			}
			for _, id := range ids {
				if !slices.ContainsFunc(want, func(j *Job) bool { return j.ID.String() == id }) {
					t.Fatalf("random page holds %s, which does not match %+v", id, q)
				}
				drawn[id] = true
			}
		}
		if len(drawn) != len(want) {
			t.Fatalf("200 random pages of 10 drew %d of the %d jobs matching %+v", len(drawn), len(want), q)
		}
	}
}

func referenceList(all []*Job, q JobQuery) []*Job {
	var out []*Job
	for _, j := range all {
		if j.TeamID != q.TeamID {
			continue
		}
		if len(q.States) > 0 && !slices.Contains(q.States, j.State) {
			continue
		}
		if !q.CreatedFrom.IsZero() && j.CreatedAt.Before(q.CreatedFrom) {
			continue
		}
		if !q.CreatedTo.IsZero() && !j.CreatedAt.Before(q.CreatedTo) {
			continue
		}
		if len(q.Tags) > 0 && !slices.ContainsFunc(j.Tags, func(tag string) bool { return slices.Contains(q.Tags, tag) }) {
			continue
		}
		if q.Template != (ulid.ULID{}) && j.TemplateID != q.Template {
			continue
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *Job) int {
		switch q.Sort {
		case SortNewestFirst:
			return b.ID.Compare(a.ID)
		case SortPriority:
			if a.Priority != b.Priority {
				return b.Priority - a.Priority
			}
		}
		return a.ID.Compare(b.ID)
	})
	return out
}

func jobIDsOf(jobs []*Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID.String()
	}
	return out
}

func TestTemplateInUseBlocksDelete(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	team, tplID, jobID := ids.New(time.Now()), ids.New(time.Now()), ids.New(time.Now())
	if err := s.Apply(&PutTemplate{Template: &Template{ID: tplID, TeamID: team, Status: TemplateUploaded}}); err != nil {
		t.Fatal(err)
	}
	job := &Job{ID: jobID, TeamID: team, TemplateID: tplID, State: JobQueued}
	if err := s.Apply(&CreateJobs{At: testNow, Jobs: []*Job{job}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(&DeleteTemplate{TeamID: team, TemplateID: tplID}); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete while queued: %v, want ErrConflict", err)
	}
	finished := *job
	finished.State = JobFinished
	if err := s.Apply(&ChangeJob{At: testNow, Prev: JobQueued, Job: &finished}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(&DeleteTemplate{TeamID: team, TemplateID: tplID}); err != nil {
		t.Fatalf("delete after the job finished: %v", err)
	}
	otherTeam := ids.New(time.Now())
	if err := s.Apply(&DeleteTemplate{TeamID: otherTeam, TemplateID: tplID}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete from another team: %v, want ErrNotFound", err)
	}
	// A job naming a template that is gone is refused.
	late := &Job{ID: ids.New(time.Now()), TeamID: team, TemplateID: tplID, State: JobQueued}
	if err := s.Apply(&CreateJobs{At: testNow, Jobs: []*Job{late}}); !errors.Is(err, ErrTemplateGone) {
		t.Fatalf("a job for a deleted template: %v, want ErrTemplateGone", err)
	}
}

func TestLogIsCappedAndOrdered(t *testing.T) {
	s := openTestStore(t, "")
	jobID := NewIDs().New(time.Now())
	for range 3 {
		err := s.update(func(tx *txn) error {
			lines := make([]string, MaxLogLines/2)
			for i := range lines {
				lines[i] = fmt.Sprintf("line %d", i)
			}
			return tx.appendLog(jobID, testNow, lines...)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var log string
	s.view(func(tx *txn) error { log = tx.Log(jobID); return nil })
	lines := splitLines(log)
	if len(lines) != MaxLogLines+1 {
		t.Fatalf("%d lines, want %d", len(lines), MaxLogLines+1)
	}
	if got := lines[len(lines)-1]; got[len(got)-len(logTruncated):] != logTruncated {
		t.Fatalf("last line %q does not say the log was truncated", got)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func TestBatchJobsFollowStateChanges(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	team, batch := ids.New(time.Now()), ids.New(time.Now())
	jobs := []*Job{
		{ID: ids.New(time.Now()), TeamID: team, BatchID: batch, BatchIndex: 0, State: JobQueued},
		{ID: ids.New(time.Now()), TeamID: team, BatchID: batch, BatchIndex: 2, State: JobPending},
	}
	child := &Job{ID: ids.New(time.Now()), TeamID: team, BatchID: batch, ParentID: jobs[1].ID, State: JobQueued}
	err := s.update(func(tx *txn) error {
		for _, j := range append(jobs, child) {
			if err := tx.createJob(j, testNow); err != nil {
				return err
			}
		}
		jobs[0].State = JobCancelled
		return tx.updateJob(JobQueued, jobs[0], testNow)
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []BatchJob
	s.view(func(tx *txn) error { got = tx.BatchJobs(batch); return nil })
	want := []BatchJob{{0, jobs[0].ID, JobCancelled}, {2, jobs[1].ID, JobPending}}
	if !slices.Equal(got, want) {
		t.Fatalf("batch jobs %v, want %v (children are not top-level)", got, want)
	}
}

// TestASplitJobIsListedAsItsClientSeesIt: a split job waiting on its chunks (pending) is listed
// and counted as queued until its first chunk starts, as rendering from then, as it ends once
// it ended; the live index keeps it pending, as the coordinator works from it.
func TestASplitJobIsListedAsItsClientSeesIt(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	team := ids.New(time.Now())
	j := &Job{ID: ids.New(time.Now()), TeamID: team, State: JobPending, ChunkFrames: 10}
	listedAs := func(want, live JobState) {
		t.Helper()
		s.view(func(tx *txn) error {
			for _, state := range []JobState{JobQueued, JobPending, JobRendering, JobFinished} {
				jobs, total, err := tx.ListJobs(JobQuery{TeamID: team, States: []JobState{state}, Limit: 10})
				if n := len(jobs); err != nil || (state == want) != (n == 1) || total != n || tx.JobCount(team, state) != n {
					t.Errorf("listed as %s: %d (total %d, count %d, %v), want it listed as %s", state, n, total, tx.JobCount(team, state), err, want)
				}
			}
			// The live index, the coordinator's, files it under its own state.
			var filed int
			tx.scanPrefix(bucketLiveJobs, stateKey(live), func(_, _ []byte) bool { filed++; return true })
			if (filed == 1) != !live.Terminal() {
				t.Errorf("%d jobs %s in the live index", filed, live)
			}
			return nil
		})
	}
	if err := s.update(func(tx *txn) error { return tx.createJob(j, testNow) }); err != nil {
		t.Fatal(err)
	}
	listedAs(JobQueued, JobPending)
	started := j.Clone()
	started.StartedAt = testNow
	if err := s.Apply(&ChangeJob{At: testNow, Prev: JobPending, Job: started}); err != nil {
		t.Fatal(err)
	}
	listedAs(JobRendering, JobPending)
	// Its chunks rendered, it waits for a slot to join them: still rendering to its client.
	joining := started.Clone()
	joining.State = JobQueued
	if err := s.Apply(&ChangeJob{At: testNow, Prev: JobPending, Job: joining}); err != nil {
		t.Fatal(err)
	}
	listedAs(JobRendering, JobQueued)
	dispatched := joining.Clone()
	dispatched.State = JobRendering
	if err := s.Apply(&ChangeJob{At: testNow, Prev: JobQueued, Job: dispatched}); err != nil {
		t.Fatal(err)
	}
	listedAs(JobRendering, JobRendering)
	finished := dispatched.Clone()
	finished.State, finished.FinishedAt = JobFinished, testNow
	if err := s.Apply(&ChangeJob{At: testNow, Prev: JobRendering, Job: finished}); err != nil {
		t.Fatal(err)
	}
	listedAs(JobFinished, JobFinished)
}

// TestLogTimeMatchesFormat: log lines carry the time as time.Format writes it.
func TestLogTimeMatchesFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, when := range []time.Time{{}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), testNow} {
		if got, want := string(appendLogTime(nil, when)), when.UTC().Format("2006-01-02T15:04:05.000Z07:00"); got != want {
			t.Errorf("%v: %s, want %s", when, got, want)
		}
	}
	zone := time.FixedZone("x", -7*3600)
	for range 10000 {
		when := time.UnixMilli(rng.Int64N(253402300799999)).Add(time.Duration(rng.IntN(1e6))).In(zone)
		if got, want := string(appendLogTime(nil, when)), when.UTC().Format("2006-01-02T15:04:05.000Z07:00"); got != want {
			t.Fatalf("%v: %s, want %s", when, got, want)
		}
	}
}

// TestListJobsWithoutALimitReadsNoPage: a query with no room for jobs answers the total alone
// (the API asks for at least one; a caller that asks for none must not read them all).
func TestListJobsWithoutALimitReadsNoPage(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	team := ids.New(time.Now())
	var jobs []*Job
	for i := range 5 {
		jobs = append(jobs, &Job{ID: ids.New(time.Now()), TeamID: team, State: JobQueued, Priority: i % 2, Tags: []string{"a", "b"}})
	}
	storeJobs(t, s, jobs)
	for _, q := range []JobQuery{{Sort: SortOldestFirst}, {Sort: SortNewestFirst}, {Sort: SortPriority}, {Sort: SortOldestFirst, Tags: []string{"a", "b"}}} {
		q.TeamID = team
		var got []*Job
		var total int
		if err := s.view(func(tx *txn) (err error) { got, total, err = tx.ListJobs(q); return err }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 || total != 5 {
			t.Errorf("%+v: %d jobs, total %d; want none of 5", q, len(got), total)
		}
	}
}

// FuzzListJobs: any query in creation or priority order, with any states, tags, dates, offset
// and limit, answers what filtering and sorting every job does (jobs sharing milliseconds).
func FuzzListJobs(f *testing.F) {
	s, err := Open(filepath.Join(f.TempDir(), "framefarm.db"), Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	teams, base, tags, all := referenceJobs(f, s, time.Millisecond)
	sorts := []JobSort{SortOldestFirst, SortNewestFirst, SortPriority}
	f.Add(uint16(0), uint8(20), uint8(2), uint16(0), uint16(0), uint16(0), uint8(0))
	f.Add(uint16(120), uint8(7), uint8(2), uint16(300), uint16(1200), uint16(0x3f), uint8(0b10101))
	f.Add(uint16(3), uint8(9), uint8(1), uint16(200), uint16(0), uint16(0x5), uint8(0xc0))
	f.Fuzz(func(t *testing.T, offset uint16, limit, sort uint8, from, to, states uint16, tagSet uint8) {
		q := JobQuery{TeamID: teams[int(sort>>4)%2], Offset: int(offset % 400), Limit: int(limit), Sort: sorts[int(sort)%len(sorts)]}
		if from > 0 {
			q.CreatedFrom = base.Add(time.Duration(from%1600) * time.Millisecond)
		}
		if to > 0 {
			q.CreatedTo = base.Add(time.Duration(to%1600) * time.Millisecond)
		}
		for i, st := range AllJobStates {
			if states&(1<<i) != 0 {
				q.States = append(q.States, st)
			}
		}
		for i, tag := range append(tags, "none") {
			if tagSet&(1<<i) != 0 {
				q.Tags = append(q.Tags, tag)
			}
		}
		// The top bit lists one template's jobs instead (in creation order, without tags).
		if tagSet&0x80 != 0 && q.Sort != SortPriority {
			q.Tags, q.Template = nil, referenceTemplates[1+int(tagSet>>6&1)]
		}
		checkListing(t, s, all, q)
	})
}

// Log returns a job's own log lines as text, one line per entry.
func (t *txn) Log(jobID ulid.ULID) string {
	var sb strings.Builder
	t.scanPrefix(bucketLogs, id(jobID), func(_, v []byte) bool {
		sb.Write(v)
		sb.WriteByte('\n')
		return true
	})
	return sb.String()
}
