package persistence

import (
	"cmp"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// farmJobs are jobs of three teams on two engines and a pool, some named, in every state, made
// over a few hours, some moved to another state after.
func farmJobs(t *testing.T, s *Store) []*Job {
	t.Helper()
	ids := NewIDs()
	rng := rand.New(rand.NewPCG(11, 12))
	teams := []ulid.ULID{ids.New(time.Now()), ids.New(time.Now()), ids.New(time.Now())}
	names := []string{"", "Spot Lyon", "spot lyon 2", "Spot Paris", "Trailer"}
	var jobs []*Job
	for i := range 120 {
		j := &Job{ID: ids.New(testNow.Add(time.Duration(i) * time.Minute)), TeamID: teams[rng.IntN(3)], Kind: KindRender,
			State: AllJobStates[rng.IntN(len(AllJobStates))], Engine: []string{"lottie", "ae2026"}[rng.IntN(2)],
			Pool: []string{"", "", "gpu"}[rng.IntN(3)], Name: names[rng.IntN(len(names))], Priority: rng.IntN(3) - 1}
		j.CreatedAt = time.UnixMilli(int64(j.ID.Time())).UTC()
		jobs = append(jobs, j)
	}
	storeJobs(t, s, jobs)
	// Some change state afterwards, as jobs do.
	if err := s.update(func(tx *txn) error {
		for _, j := range jobs[:40] {
			prev := j.State
			j.State = JobFinished
			if err := tx.updateJob(prev, j, testNow); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// referenceFarmList is what a farm-wide listing must give, by walking every job.
func referenceFarmList(all []*Job, q JobQuery, engine, pool string) []*Job {
	var out []*Job
	for _, j := range all {
		if q.TeamID != FarmScope && j.TeamID != q.TeamID ||
			len(q.States) > 0 && !slices.Contains(q.States, j.State) ||
			engine != "" && j.Engine != engine || pool != "" && j.Pool != pool ||
			q.Name != "" && !strings.HasPrefix(strings.ToLower(j.Name), strings.ToLower(q.Name)) {
			continue
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *Job) int {
		if q.Name != "" {
			if c := cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)); c != 0 {
				return c
			}
		}
		return a.ID.Compare(b.ID)
	})
	if q.Sort == SortNewestFirst {
		slices.Reverse(out)
	}
	return out
}

// TestTheFarmListsEveryTeamsJobs: the farm's scope lists every team's jobs by creation, in a
// state, from an offset; placement tags filter them by engine and pool, a team's as the farm's;
// names find them by their start, case aside, in name order.
func TestTheFarmListsEveryTeamsJobs(t *testing.T) {
	s := openTestStore(t, "")
	jobs := farmJobs(t, s)
	team := jobs[0].TeamID
	list := func(q JobQuery) []*Job {
		t.Helper()
		var got []*Job
		if err := s.view(func(tx *txn) (err error) { got, _, err = tx.ListJobs(q); return err }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	placement := func(scope ulid.ULID, engine, pool string) []string {
		var tags []string
		s.view(func(tx *txn) error { tags = tx.PlacementTags(scope, engine, pool); return nil })
		return tags
	}
	cases := []struct {
		name         string
		q            JobQuery
		engine, pool string
	}{
		{name: "every team's jobs", q: JobQuery{TeamID: FarmScope, Limit: 1000}},
		{name: "newest first from an offset", q: JobQuery{TeamID: FarmScope, Offset: 17, Limit: 30, Sort: SortNewestFirst}},
		{name: "in two states", q: JobQuery{TeamID: FarmScope, Limit: 1000, States: []JobState{JobQueued, JobFailed}}},
		{name: "the ae2026 jobs", q: JobQuery{TeamID: FarmScope, Limit: 1000}, engine: "ae2026"},
		{name: "the gpu pool's jobs", q: JobQuery{TeamID: FarmScope, Limit: 1000}, pool: "gpu"},
		{name: "a team's lottie jobs in the gpu pool", q: JobQuery{TeamID: team, Limit: 1000}, engine: "lottie", pool: "gpu"},
		{name: "names starting 'spot l'", q: JobQuery{TeamID: FarmScope, Limit: 1000, Name: "spot l"}},
		{name: "a team's names starting 'SPOT', newest first, finished", q: JobQuery{TeamID: team, Limit: 1000, Name: "SPOT",
			Sort: SortNewestFirst, States: []JobState{JobFinished}}},
	}
	for _, tc := range cases {
		q := tc.q
		if tc.engine != "" || tc.pool != "" {
			q.Tags = placement(q.TeamID, tc.engine, tc.pool)
		}
		want := referenceFarmList(jobs, tc.q, tc.engine, tc.pool)
		if q.Offset > 0 {
			want = want[min(q.Offset, len(want)):]
		}
		want = want[:min(q.Limit, len(want))]
		if got := list(q); !slices.EqualFunc(got, want, func(a, b *Job) bool { return a.ID == b.ID }) || len(want) == 0 {
			t.Errorf("%s: %d jobs, want %d\n got %v\nwant %v", tc.name, len(got), len(want), jobIDsOf(got), jobIDsOf(want))
		}
	}
	counts := s.JobCountsByState()
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != len(jobs) {
		t.Fatalf("the teams' counts add up to %d jobs, want %d (the farm's counted again?)", total, len(jobs))
	}
}

// TestUpgradeToSchema8FilesTheFarm: a store written before the farm's scope gets its jobs filed
// there, under placement tags and by name, in steps; stopped after the first, the next open goes
// on, and the result is what writing the jobs now makes.
func TestUpgradeToSchema8FilesTheFarm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	farmJobs(t, s)
	s.Close()
	buckets := [][]byte{bucketJobsByTeamState, bucketJobsByTeamTag, bucketJobCounts, bucketTagCounts, bucketJobTimeCounts, bucketTagTimeCounts, bucketJobsByName}
	want := map[string]map[string]string{}
	for _, b := range buckets {
		want[string(b)] = bucketDump(t, path, b)
	}
	downgradeToSchema7(t, path)
	s = openAfterAKill(t, path, 50, "7")
	s.Close()
	for _, b := range buckets {
		if got := bucketDump(t, path, b); !reflect.DeepEqual(got, want[string(b)]) {
			t.Errorf("%s after the upgrade: %d keys, want %d", b, len(got), len(want[string(b)]))
		}
	}
}
