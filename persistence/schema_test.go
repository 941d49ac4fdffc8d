package persistence

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// queuedEntries reads the queue as a restart does.
func queuedEntries(t *testing.T, s *Store) []QueueEntry {
	t.Helper()
	var got []QueueEntry
	err := s.view(func(tx *txn) error {
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
	if err := s.update(func(tx *txn) error {
		if err := tx.createJob(a, testNow); err != nil {
			return err
		}
		return tx.createJob(b, testNow)
	}); err != nil {
		t.Fatal(err)
	}
	// b is dispatched, fails on n1, and comes back; a is cancelled.
	if err := s.update(func(tx *txn) error {
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
	var jobs []*Job
	for i := range 25 {
		j := &Job{ID: ids.New(time.Now().Add(time.Duration(i) * time.Hour)), TeamID: team, State: JobQueued, Engine: "lottie", Priority: i % 3, Tags: []string{"t"}}
		if i%5 == 0 {
			j.State, j.FinishedAt = JobFinished, time.Now()
		} else {
			want = append(want, j.QueueEntry())
		}
		jobs = append(jobs, j)
	}
	storeJobs(t, s, jobs)
	s.Close()
	counts, ended := bucketDump(t, path, bucketJobTimeCounts), bucketDump(t, path, bucketJobsByEnd)
	downgradeToSchema1(t, path)

	s = openAfterAKill(t, path, 7, "")
	if got := queuedEntries(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("queue after the upgrade %+v, want %+v", got, want)
	}
	s.Close()
	if v := schemaVersion(t, path); v != strconv.Itoa(SchemaVersion) {
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

// TestUpgradeFromSchema2SurvivesAKillHalfway: the team index and the templates' index go, each
// template's live jobs are counted instead, and counters at zero go, in chunks; stopped after the
// first chunk the store is still version 2, and the next open goes on from there.
func TestUpgradeFromSchema2SurvivesAKillHalfway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	team, tplA, tplB := ids.New(time.Now()), ids.New(time.Now()), ids.New(time.Now())
	states := []JobState{JobQueued, JobRendering, JobFinished, JobCancelled}
	var all []ulid.ULID
	var jobs []*Job
	for i := range 12 {
		j := &Job{ID: ids.New(time.Now().Add(time.Duration(i) * time.Minute)), TeamID: team, TemplateID: tplA, State: states[i%4], Priority: i%3 - 1, Tags: []string{"t"}}
		if i >= 8 {
			j.TemplateID = tplB
		}
		if j.State.Terminal() {
			j.FinishedAt = time.Now()
		}
		all, jobs = append(all, j.ID), append(jobs, j)
	}
	storeJobs(t, s, jobs)
	s.Close()
	rewritten := [][]byte{bucketJobCounts, bucketTagCounts, bucketJobTimeCounts, bucketTagTimeCounts, bucketPriorityTimeCounts, bucketPriorityCounts, bucketTemplateLiveJobs, bucketJobsByTeamPriority, bucketJobsByTeamState}
	want := map[string]map[string]string{}
	for _, b := range rewritten {
		want[string(b)] = bucketDump(t, path, b)
	}
	if n := readCount([]byte(want[string(bucketTemplateLiveJobs)][string(tplA[:])])); n != 4 {
		t.Fatalf("template A has %d live jobs, want 4", n)
	}
	downgradeToSchema2(t, path)

	s = openAfterAKill(t, path, 3, "2")
	var listed []ulid.ULID
	if err := s.view(func(tx *txn) error {
		if !tx.TemplateInUse(tplA) || !tx.TemplateInUse(tplB) {
			t.Error("a template with live jobs is not in use after the upgrade")
		}
		jobs, total, err := tx.ListJobs(JobQuery{TeamID: team, Limit: 100, Sort: SortOldestFirst})
		for _, j := range jobs {
			listed = append(listed, j.ID)
		}
		if total != len(all) {
			t.Errorf("total %d, want %d", total, len(all))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(listed, all) {
		t.Fatalf("every job oldest first after the upgrade: %v, want %v", listed, all)
	}
	if len(want[string(bucketJobsByTeamPriority)]) != 8 {
		t.Fatalf("%d jobs in the priority index, want the 8 with a priority of their own", len(want[string(bucketJobsByTeamPriority)]))
	}
	s.Close()
	if v := schemaVersion(t, path); v != strconv.Itoa(SchemaVersion) {
		t.Fatalf("schema version %q after the upgrade", v)
	}
	for _, b := range rewritten {
		if got := bucketDump(t, path, b); !reflect.DeepEqual(got, want[string(b)]) {
			t.Errorf("%s after the upgrade %v, want %v", b, got, want[string(b)])
		}
	}
	for _, b := range [][]byte{bucketJobsByTeamV2, bucketJobsByTemplateV2} {
		if bucketExists(t, path, b) {
			t.Errorf("bucket %s is still there after the upgrade", b)
		}
	}
}

// openAfterAKill opens an older store with migrations of chunk records, stopped after the first
// chunk as a kill would stop them (the version must still be stoppedAt), then opens it again to
// finish the upgrade.
func openAfterAKill(t *testing.T, path string, chunk int, stoppedAt string) *Store {
	t.Helper()
	size, hook := migrationChunk, afterMigrationChunk
	t.Cleanup(func() { migrationChunk, afterMigrationChunk = size, hook })
	migrationChunk = chunk
	errKilled := errors.New("killed")
	afterMigrationChunk = func() error { return errKilled }
	if _, err := Open(path, Options{}); !errors.Is(err, errKilled) {
		t.Fatalf("open stopped after a chunk: %v", err)
	}
	if v := schemaVersion(t, path); v != stoppedAt {
		t.Fatalf("schema version %q after a migration stopped halfway, want %q", v, stoppedAt)
	}
	afterMigrationChunk = nil
	return openTestStore(t, path)
}

// TestUpgradeFromSchema3SurvivesAKillHalfway: jobs with a priority of their own are counted by
// creation time, per team and tag, in chunks; stopped after the first chunk the store is still
// version 3, and the next open goes on from there (counting no job twice).
func TestUpgradeFromSchema3SurvivesAKillHalfway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	team := ids.New(time.Now())
	var jobs []*Job
	for i := range 30 {
		j := &Job{ID: ids.New(time.Now().Add(time.Duration(i) * time.Minute)), TeamID: team, State: []JobState{JobQueued, JobFinished}[i%2], Priority: i%5 - 2}
		if i%3 == 0 {
			j.Tags = []string{"t", "u"}
		}
		if j.State.Terminal() {
			j.FinishedAt = time.Now()
		}
		jobs = append(jobs, j)
	}
	storeJobs(t, s, jobs)
	s.Close()
	want := map[string]map[string]string{}
	for _, b := range [][]byte{bucketPriorityTimeCounts, bucketPriorityCounts} {
		if want[string(b)] = bucketDump(t, path, b); len(want[string(b)]) == 0 {
			t.Fatalf("nothing written in %s", b)
		}
	}
	downgradeToSchema3(t, path)

	s = openAfterAKill(t, path, 5, "3")
	page := JobQuery{TeamID: team, Offset: 7, Limit: 9, Sort: SortPriority, Tags: []string{"t"}}
	var got []*Job
	if err := s.view(func(tx *txn) (err error) { got, _, err = tx.ListJobs(page); return err }); err != nil {
		t.Fatal(err)
	}
	wantPage := referenceList(jobs, page)[7:]
	if !slices.EqualFunc(got, wantPage, func(a, b *Job) bool { return a.ID == b.ID }) {
		t.Errorf("a tag's jobs in priority order after the upgrade: %v, want %v", jobIDsOf(got), jobIDsOf(wantPage))
	}
	s.Close()
	if v := schemaVersion(t, path); v != strconv.Itoa(SchemaVersion) {
		t.Fatalf("schema version %q after the upgrade", v)
	}
	for b, counters := range want {
		if got := bucketDump(t, path, []byte(b)); !reflect.DeepEqual(got, counters) {
			t.Errorf("%s after the upgrade %v, want %v", b, got, counters)
		}
	}
}

// downgradeToSchema8 makes the store look as schema 8 wrote it: split jobs waiting on their
// chunks filed under pending.
func downgradeToSchema8(t *testing.T, path string) {
	rawUpdate(t, path, func(btx *bolt.Tx) error {
		tx := &txn{tx: btx}
		var split []*Job
		err := btx.Bucket(bucketJobs).ForEach(func(_, raw []byte) error {
			j, err := decodeJob(raw)
			if err == nil && j.Split() && j.State.Cancellable() {
				split = append(split, j)
			}
			return err
		})
		for _, j := range split {
			err = errors.Join(err, tx.deleteJobIndexes(j, filedAs(j)), tx.writeJobIndexes(j, filing{state: j.State, listed: j.State}))
		}
		return errors.Join(err, tx.finish(), btx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("8")))
	})
}

// downgradeToSchema7 makes the store look as schema 7 wrote it: nothing in the farm's scope,
// under placement tags or by name.
func downgradeToSchema7(t *testing.T, path string) {
	downgradeToSchema8(t, path)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		farm := id(FarmScope)
		for _, name := range [][]byte{bucketJobsByTeamState, bucketJobsByTeamTag, bucketJobCounts, bucketTagCounts, bucketJobTimeCounts, bucketTagTimeCounts} {
			b := tx.Bucket(name)
			var drop [][]byte
			b.ForEach(func(k, _ []byte) error {
				placed := len(k) > 17 && bytes.HasPrefix(k[17:], []byte("engine="))
				if bytes.HasPrefix(k, farm) || placed {
					drop = append(drop, bytes.Clone(k))
				}
				return nil
			})
			for _, k := range drop {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
		}
		if err := tx.DeleteBucket(bucketJobsByName); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("7"))
	})
}

// downgradeToSchema3 makes the store look as schema 3 wrote it: no priority counters.
func downgradeToSchema3(t *testing.T, path string) {
	downgradeToSchema7(t, path)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketPriorityTimeCounts, bucketPriorityCounts} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("3"))
	})
}

// downgradeToSchema2 makes the store look as schema 2 wrote it: a team index, an index of the
// templates' live jobs, every job in the priority index and none marked in the creation index, no
// template counters, no tag counters by time, and counters left at zero.
func downgradeToSchema2(t *testing.T, path string) {
	downgradeToSchema3(t, path)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		byTeam, err := tx.CreateBucket(bucketJobsByTeamV2)
		if err != nil {
			return err
		}
		byTemplate, err := tx.CreateBucket(bucketJobsByTemplateV2)
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketJobs).ForEach(func(_, raw []byte) error {
			j, err := decodeJob(raw)
			if err != nil {
				return err
			}
			if err := byTeam.Put(key(id(j.TeamID), id(j.ID)), stateKey(j.State)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketJobsByTeamState).Put(key(id(j.TeamID), stateKey(j.State), id(j.ID)), []byte{}); err != nil {
				return err
			}
			if err := tx.Bucket(bucketJobsByTeamPriority).Put(key(id(j.TeamID), invertedPriority(j.Priority), id(j.ID)), stateKey(j.State)); err != nil {
				return err
			}
			if j.State.Terminal() || j.TemplateID == (ulid.ULID{}) {
				return nil
			}
			return byTemplate.Put(key(id(j.TemplateID), id(j.ID)), []byte{})
		})
		if err != nil {
			return err
		}
		for _, b := range [][]byte{bucketTemplateLiveJobs, bucketTagTimeCounts} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		var zero [8]byte
		for i, b := range [][]byte{bucketJobCounts, bucketTagCounts, bucketJobTimeCounts} {
			for _, k := range [][]byte{{byte(i)}, {0xff, byte(i)}} {
				if err := tx.Bucket(b).Put(k, zero[:]); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("2"))
	})
}

// downgradeToSchema1 makes the store look as the release before schema versions wrote it.
func downgradeToSchema1(t *testing.T, path string) {
	downgradeToSchema2(t, path)
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

func bucketExists(t *testing.T, path string, bucket []byte) bool {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exists := false
	db.View(func(tx *bolt.Tx) error { exists = tx.Bucket(bucket) != nil; return nil })
	return exists
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

// TestUpgradeFromSchema8SurvivesAKillHalfway: split jobs waiting on their chunks, filed under
// pending, are filed again under the state their clients see (queued until their first chunk
// started, rendering from then), in chunks; stopped after the first chunk the store is still
// version 8, and the next open goes on from there. Listings by state then agree with the jobs.
func TestUpgradeFromSchema8SurvivesAKillHalfway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s := openTestStore(t, path)
	ids := NewIDs()
	team := ids.New(time.Now())
	var jobs []*Job
	for i := range 8 {
		j := &Job{ID: ids.New(time.Now().Add(time.Duration(i) * time.Minute)), TeamID: team, State: JobPending, Tags: []string{"t"}}
		switch {
		case i < 4:
			j.ChunkFrames = 10 // a split job, its first chunk started for half of them
			if i%2 == 0 {
				j.StartedAt = time.Now()
			}
		case i < 6:
			// A split job queued to join its chunks, and a job queued.
			j.State = JobQueued
			if i == 4 {
				j.ChunkFrames, j.StartedAt = 10, time.Now()
			}
		}
		jobs = append(jobs, j)
	}
	storeJobs(t, s, jobs)
	s.Close()
	rewritten := [][]byte{bucketJobCounts, bucketTagCounts, bucketJobsByTeamState, bucketJobsByTeamTag, bucketLiveJobs, bucketJobTimeCounts}
	want := map[string]map[string]string{}
	for _, b := range rewritten {
		want[string(b)] = bucketDump(t, path, b)
	}
	downgradeToSchema8(t, path)
	if got := bucketDump(t, path, bucketJobsByTeamState); reflect.DeepEqual(got, want[string(bucketJobsByTeamState)]) {
		t.Fatal("the downgrade changed nothing")
	}

	s = openAfterAKill(t, path, 2, "8")
	for state, n := range map[JobState]int{JobQueued: 3, JobRendering: 3, JobPending: 2} {
		var listed []*Job
		if err := s.view(func(tx *txn) (err error) {
			listed, _, err = tx.ListJobs(JobQuery{TeamID: team, States: []JobState{state}, Limit: 100})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(listed) != n || slices.ContainsFunc(listed, func(j *Job) bool { return j.Listed() != state }) {
			t.Errorf("listed as %s: %d jobs (%v), want %d listed so", state, len(listed), jobIDsOf(listed), n)
		}
	}
	s.Close()
	if v := schemaVersion(t, path); v != strconv.Itoa(SchemaVersion) {
		t.Fatalf("schema version %q after the upgrade", v)
	}
	for _, b := range rewritten {
		if got := bucketDump(t, path, b); !reflect.DeepEqual(got, want[string(b)]) {
			t.Errorf("%s after the upgrade %v, want %v", b, got, want[string(b)])
		}
	}
}
