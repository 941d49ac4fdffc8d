package persistence

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// storeBatches creates n batches of one job each for a team, a minute apart, oldest first.
func storeBatches(t *testing.T, s *Store, ids *IDs, team ulid.ULID, n int, state JobState) []ulid.ULID {
	t.Helper()
	var out []ulid.ULID
	for i := range n {
		at := testNow.Add(time.Duration(len(out)+i) * time.Minute)
		b := &Batch{ID: ids.New(at), TeamID: team, Total: 1, CreatedAt: at}
		j := &Job{ID: ids.New(at), TeamID: team, BatchID: b.ID, State: state, CreatedAt: at, OutputName: "x.mp4"}
		b.Jobs = []BatchEntry{{Index: 0, JobID: j.ID}}
		if err := s.Apply(&CreateJobs{At: at, Batch: b, Jobs: []*Job{j}}); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.ID)
	}
	return out
}

func batchIDs(page []BatchSummary) []string {
	var out []string
	for _, b := range page {
		out = append(out, b.ID.String())
	}
	return out
}

// TestTeamBatchesNewestFirst: a team's batches page by page, newest first, counted by state;
// another team's are not among them.
func TestTeamBatchesNewestFirst(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	acme, rival := ids.New(testNow), ids.New(testNow)
	mine := storeBatches(t, s, ids, acme, 5, JobQueued)
	storeBatches(t, s, ids, rival, 3, JobQueued)
	slices.Reverse(mine)
	var want []string
	for _, id := range mine {
		want = append(want, id.String())
	}
	first, err := s.TeamBatches(acme, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := s.TeamBatches(acme, 3, 3)
	if got := append(batchIDs(first), batchIDs(second)...); !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	if b := first[0]; b.Jobs != 1 || b.States[JobQueued] != 1 || !b.CreatedAt.Equal(time.UnixMilli(int64(b.ID.Time())).UTC()) {
		t.Fatalf("summary %+v", b)
	}
	if none, _ := s.TeamBatches(ids.New(testNow), 0, 10); len(none) != 0 {
		t.Fatalf("a team without batches lists %v", batchIDs(none))
	}
}

// TestUpgradeFromSchema4SurvivesAKillHalfway: every batch is filed in its team's list, in chunks.
func TestUpgradeFromSchema4SurvivesAKillHalfway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	team := ids.New(testNow)
	made := storeBatches(t, s, ids, team, 12, JobFinished)
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketBatchesByTeam); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("4"))
	})
	s = openAfterAKill(t, path, 5, "4")
	page, err := s.TeamBatches(team, 0, 100)
	if err != nil || len(page) != len(made) || page[0].ID != made[len(made)-1] || page[len(page)-1].ID != made[0] {
		t.Fatalf("after the upgrade: %v %v", batchIDs(page), err)
	}
	if page[0].States[JobFinished] != 1 {
		t.Fatalf("counted %v", page[0].States)
	}
	s.Close()
	if v := schemaVersion(t, path); v != fmt.Sprint(SchemaVersion) {
		t.Fatalf("schema version %q", v)
	}
}

// TestUpgradeFromSchema5SurvivesAKillHalfway: every job with a template is filed under it, in
// chunks, and a listing of one template's jobs finds them.
func TestUpgradeFromSchema5SurvivesAKillHalfway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	team, tpl := ids.New(testNow), ids.New(testNow)
	var jobs []*Job
	for i := range 13 {
		j := &Job{ID: ids.New(testNow.Add(time.Duration(i) * time.Second)), TeamID: team, State: []JobState{JobQueued, JobFinished}[i%2]}
		if i%4 != 0 {
			j.TemplateID = tpl
		}
		jobs = append(jobs, j)
	}
	storeJobs(t, s, jobs)
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketJobsByTeamTemplate); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("5"))
	})
	s = openAfterAKill(t, path, 4, "5")
	q := JobQuery{TeamID: team, Template: tpl, Limit: 100, Sort: SortNewestFirst, States: []JobState{JobQueued}}
	var got []*Job
	if err := s.view(func(tx *txn) (err error) { got, _, err = tx.ListJobs(q); return err }); err != nil {
		t.Fatal(err)
	}
	if want := referenceList(jobs, q); !slices.EqualFunc(got, want, func(a, b *Job) bool { return a.ID == b.ID }) || len(want) == 0 {
		t.Fatalf("the template's queued jobs after the upgrade: %v, want %v", jobIDsOf(got), jobIDsOf(want))
	}
}
