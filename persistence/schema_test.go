package persistence

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// queuedEntries reads the queue as a restart does.
func queuedEntries(t *testing.T, s *Store) []QueueEntry {
	t.Helper()
	var got []QueueEntry
	err := s.View(func(tx *Tx) error {
		return tx.QueuedJobs(func(e QueueEntry) error { got = append(got, e); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestQueueEntriesFollowTheJob: the live-jobs index holds each queued job's entry (nodes it
// failed on included) and nothing once the job leaves the queue.
func TestQueueEntriesFollowTheJob(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	team := ids.New(time.Now())
	a := &Job{ID: ids.New(time.Now()), TeamID: team, State: JobQueued, Engine: "lottie", Priority: -7, Tags: []string{"b", "a"}}
	b := &Job{ID: ids.New(time.Now()), TeamID: team, State: JobQueued, Engine: "ae2026"}
	if err := s.update(func(tx *Tx) error {
		if err := tx.createJob(a, testNow); err != nil {
			return err
		}
		return tx.createJob(b, testNow)
	}); err != nil {
		t.Fatal(err)
	}
	// b is dispatched, fails on n1, and comes back; a is cancelled.
	if err := s.update(func(tx *Tx) error {
		b.State = JobRendering
		if err := tx.updateJob(JobQueued, b, testNow); err != nil {
			return err
		}
		b.State, b.Failures = JobQueued, []AttemptFailure{{Attempt: 1, Node: "n1"}, {Attempt: 2, Node: "n1"}}
		if err := tx.updateJob(JobRendering, b, testNow); err != nil {
			return err
		}
		a.State = JobCancelled
		return tx.updateJob(JobQueued, a, testNow)
	}); err != nil {
		t.Fatal(err)
	}
	want := []QueueEntry{{JobID: b.ID, TeamID: team, Engine: "ae2026", Avoid: []string{"n1"}}}
	if got := queuedEntries(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("queue %+v, want %+v", got, want)
	}
}

// TestUpgradeFromSchema1SurvivesAKillHalfway: a store written before versions were recorded gets
// its queue entries and its counters by creation time in chunks; stopped after the first chunk,
// it is still version 1, and the next open goes on from there (counting no job twice).
func TestUpgradeFromSchema1SurvivesAKillHalfway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	team := ids.New(time.Now())
	var want []QueueEntry
	if err := s.update(func(tx *Tx) error {
		for i := range 25 {
			j := &Job{ID: ids.New(time.Now().Add(time.Duration(i) * time.Hour)), TeamID: team, State: JobQueued, Engine: "lottie", Priority: i % 3, Tags: []string{"t"}}
			if i%5 == 0 {
				j.State, j.FinishedAt = JobFinished, time.Now()
			} else {
				want = append(want, j.QueueEntry())
			}
			if err := tx.createJob(j, testNow); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	counts, ended := bucketDump(t, path, bucketJobTimeCounts), bucketDump(t, path, bucketJobsByEnd)
	downgradeToSchema1(t, path)

	chunk, hook := migrationChunk, afterMigrationChunk
	t.Cleanup(func() { migrationChunk, afterMigrationChunk = chunk, hook })
	migrationChunk = 7
	errKilled := errors.New("killed")
	afterMigrationChunk = func() error { return errKilled }
	if _, err := Open(path, Options{}); !errors.Is(err, errKilled) {
		t.Fatalf("open stopped after a chunk: %v", err)
	}
	if v := schemaVersion(t, path); v != "" {
		t.Fatalf("schema version %q after a migration stopped halfway", v)
	}
	afterMigrationChunk = nil
	s = openTestStore(t, path)
	if got := queuedEntries(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("queue after the upgrade %+v, want %+v", got, want)
	}
	s.Close()
	if v := schemaVersion(t, path); v != "2" {
		t.Fatalf("schema version %q after the upgrade", v)
	}
	if got := bucketDump(t, path, bucketJobTimeCounts); !reflect.DeepEqual(got, counts) || len(counts) == 0 {
		t.Fatalf("counters by creation time after the upgrade %v, want %v", got, counts)
	}
	if got := bucketDump(t, path, bucketJobsByEnd); !reflect.DeepEqual(got, ended) || len(ended) != 5 {
		t.Fatalf("ended jobs after the upgrade %v, want %v", got, ended)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	openTestStore(t, path).Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("99"))
	})
	if _, err := Open(path, Options{}); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("open of a newer store: %v", err)
	}
}

// downgradeToSchema1 makes the store look as the release before schema versions wrote it.
func downgradeToSchema1(t *testing.T, path string) {
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		live := tx.Bucket(bucketLiveJobs)
		var keys [][]byte
		live.ForEach(func(k, _ []byte) error { keys = append(keys, k); return nil })
		for _, k := range keys {
			if err := live.Put(k, []byte{}); err != nil {
				return err
			}
		}
		for _, b := range [][]byte{bucketJobTimeCounts, bucketJobsByEnd} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Delete([]byte(metaSchemaVersion))
	})
}

// bucketDump reads a bucket's keys and values.
func bucketDump(t *testing.T, path string, bucket []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error { out[string(k)] = string(v); return nil })
	})
	return out
}

func schemaVersion(t *testing.T, path string) string {
	var v string
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error { v = string(tx.Bucket(bucketMeta).Get([]byte(metaSchemaVersion))); return nil })
	return v
}

func rawUpdate(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}
