package persistence

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout of records and indexes this build writes. Open upgrades an older
// store in place, once; a store written by a newer build is refused rather than misread.
//
//	1  the layout before versions were recorded
//	2  the live-jobs index carries each queued job's queue entry (restart without records), jobs
//	   are counted by creation time (listings by rank), terminal top-level jobs are filed by
//	   the time they ended (retention)
//	3  a job has fewer index entries: every state in creation order is read by merging the
//	   per-state index (no team index), a template's live jobs are a counter (no index), the
//	   priority index holds only jobs with a priority of their own (the creation index marks
//	   them), and counters back at zero are removed; tags' jobs are counted by creation time
//	4  jobs with a priority of their own are counted per team and tag by priority, and by
//	   creation time in all and per priority (listings in priority order by rank)
//	5  each team's batches are listed in an index of their own (GET /api/v2/batches)
//	6  jobs are filed under their template (listings of one template's jobs)
//	7  each team's live chunks are counted by state (a team's queue cap on chunks)
//	8  every team's jobs are filed and counted in one more scope, the farm's, and under their
//	   engine and pool; named jobs by name (the farm admin's listings, listings by name)
//	9  a split job is filed and counted, but in the live index, under the state its client sees
//	   (Job.Listed): queued until its first chunk starts, rendering from then
const SchemaVersion = 9

const metaSchemaVersion = "schema_version"

// ErrNewerSchema means the store was written by a newer framefarm.
var ErrNewerSchema = errors.New("the database was written by a newer framefarm")

// migrations[v] upgrades a store from version v to v+1. A migration works in chunks, each its
// own transaction that also records where it got to, so a process killed halfway goes on from
// there at the next Open; the version moves in the transaction of the last chunk.
var migrations = map[int]func(db *bolt.DB) error{
	1: upgradeTo2,
	2: upgradeTo3,
	3: upgradeTo4,
	4: upgradeTo5,
	5: upgradeTo6,
	6: upgradeTo7,
	7: upgradeTo8,
	8: upgradeTo9,
}

// Buckets of earlier schemas.
var (
	// team + job id -> state (schema 2)
	bucketJobsByTeamV2 = []byte("jobs_by_team")
	// template id + job id -> nothing, for live jobs (schema 2)
	bucketJobsByTemplateV2 = []byte("jobs_by_template")
)

const metaMigrationCursor = "migration_cursor"

// migrationChunk is how many records one migration transaction rewrites.
var migrationChunk = 10000

// afterMigrationChunk, when set (by tests), runs after each committed chunk; an error stops the
// migration there, as a kill would.
var afterMigrationChunk func() error

// prepare creates the buckets of a new store, recording the current version, and upgrades an
// older one.
func prepare(db *bolt.DB) error {
	version := 0
	err := db.Update(func(tx *bolt.Tx) error {
		fresh := tx.Bucket(bucketJobs) == nil
		if err := createBuckets(tx); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if fresh {
			return meta.Put([]byte(metaSchemaVersion), []byte(strconv.Itoa(SchemaVersion)))
		}
		version = 1
		if raw := meta.Get([]byte(metaSchemaVersion)); raw != nil {
			v, err := strconv.Atoi(string(raw))
			if err != nil {
				return fmt.Errorf("schema version %q: %w", raw, err)
			}
			version = v
		}
		return nil
	})
	if err != nil || version == 0 {
		return err
	}
	if version > SchemaVersion {
		return fmt.Errorf("%w (schema %d, this build reads up to %d)", ErrNewerSchema, version, SchemaVersion)
	}
	for ; version < SchemaVersion; version++ {
		if err := migrations[version](db); err != nil {
			return fmt.Errorf("upgrade the database from schema %d: %w", version, err)
		}
	}
	return nil
}

// migrateInChunks runs chunk until it is done, each call in its own transaction with the cursor
// the previous one left (nil at first); the version moves to version in the last chunk's
// transaction. The buckets the migration fills start empty in the first chunk: what an attempt
// that never committed a chunk wrote cannot be there, but nothing is left to chance.
func migrateInChunks(db *bolt.DB, version int, fills [][]byte, chunk func(btx *bolt.Tx, after []byte) (next []byte, done bool, err error)) error {
	for {
		done := false
		err := db.Update(func(btx *bolt.Tx) error {
			meta := btx.Bucket(bucketMeta)
			after := meta.Get([]byte(metaMigrationCursor))
			if after == nil {
				for _, name := range fills {
					if err := btx.DeleteBucket(name); err != nil {
						return err
					}
					if _, err := btx.CreateBucket(name); err != nil {
						return err
					}
				}
			}
			next, last, err := chunk(btx, after)
			if err != nil {
				return err
			}
			if !last {
				return meta.Put([]byte(metaMigrationCursor), next)
			}
			done = true
			if err := meta.Delete([]byte(metaMigrationCursor)); err != nil {
				return err
			}
			return meta.Put([]byte(metaSchemaVersion), []byte(strconv.Itoa(version)))
		})
		if err != nil {
			return err
		}
		if afterMigrationChunk != nil {
			if err := afterMigrationChunk(); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// upgradeTo2 walks every job in the team-and-state index: it counts the job by creation time,
// writes a queued job's queue entry into the live-jobs index, and files a terminal top-level job
// in the ended-jobs index (retention).
func upgradeTo2(db *bolt.DB) error {
	return migrateInChunks(db, 2, [][]byte{bucketJobTimeCounts}, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		tx := &txn{tx: btx}
		type step struct {
			team, job ulid.ULID
			state     JobState
		}
		var steps []step
		c := btx.Bucket(bucketJobsByTeamState).Cursor()
		k, _ := firstAfter(c, after)
		var last []byte
		for ; k != nil && len(steps) < migrationChunk; k, _ = c.Next() {
			steps = append(steps, step{team: ulidAt(k), state: JobState(k[16]), job: ulidAt(k[17:])})
			last = bytes.Clone(k)
		}
		// Written after the walk: bbolt cursors may skip keys when their bucket changes.
		for _, st := range steps {
			tx.addTimeCounts(&Job{ID: st.job, TeamID: st.team}, st.state, 1)
			if st.state != JobQueued && !st.state.Terminal() {
				continue
			}
			j, err := tx.Job(st.job)
			if err != nil {
				return nil, false, fmt.Errorf("job %s: %w", st.job, err)
			}
			switch {
			case st.state == JobQueued:
				err = btx.Bucket(bucketLiveJobs).Put(key(stateKey(JobQueued), id(st.job)), encodeQueueEntry(j.QueueEntry()))
			case j.ParentID == (ulid.ULID{}):
				err = btx.Bucket(bucketJobsByEnd).Put(endKey(j), []byte{})
			}
			if err != nil {
				return nil, false, err
			}
		}
		return last, len(steps) < migrationChunk, tx.finish()
	})
}

// upgradeTo3 walks, chunk by chunk, the counters (removing those at zero), the priority index
// (keeping only jobs with a priority of their own, which the creation index now marks) and the
// tags' index (counting each tag's jobs by creation time); the cursor is the walked bucket's
// place in that list and the last key read in it. The last chunk counts each template's live
// jobs from the templates' index and drops that index and the team index.
func upgradeTo3(db *bolt.DB) error {
	walked := [][]byte{bucketJobCounts, bucketTagCounts, bucketJobTimeCounts, bucketJobsByTeamPriority, bucketJobsByTeamTag}
	defaultPriority := invertedPriority(0)
	return migrateInChunks(db, 3, [][]byte{bucketTagTimeCounts, bucketTemplateLiveJobs}, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		which, from := 0, []byte(nil)
		if len(after) > 0 {
			which, from = int(after[0]), after[1:]
		}
		if which < len(walked) {
			b := btx.Bucket(walked[which])
			type entry struct{ k, v []byte }
			var read []entry
			c := b.Cursor()
			k, v := firstAfter(c, from)
			for ; k != nil && len(read) < migrationChunk; k, v = c.Next() {
				read = append(read, entry{bytes.Clone(k), bytes.Clone(v)})
			}
			// Changed after the walk: bbolt cursors may skip keys when their bucket changes.
			tx := &txn{tx: btx}
			for _, e := range read {
				var err error
				switch {
				case bytes.Equal(walked[which], bucketJobsByTeamTag):
					// team + len(tag) + tag + job id -> state
					scope := e.k[:17+int(e.k[16])]
					tx.addScopeTimeCounts(tagTimeCounter, scope, ulidAt(e.k[len(scope):]), JobState(e.v[0]), 1)
				case !bytes.Equal(walked[which], bucketJobsByTeamPriority):
					if readCount(e.v) == 0 {
						err = b.Delete(e.k)
					}
				case bytes.Equal(e.k[16:24], defaultPriority):
					err = b.Delete(e.k)
				default:
					// team + priority + job id -> state: mark the job in the creation index.
					err = btx.Bucket(bucketJobsByTeamState).Put(key(e.k[:16], e.v[:1], e.k[24:]), ownPriorityMark)
				}
				if err != nil {
					return nil, false, err
				}
			}
			if err := tx.finish(); err != nil {
				return nil, false, err
			}
			if k != nil {
				return append([]byte{byte(which)}, read[len(read)-1].k...), false, nil
			}
			return []byte{byte(which + 1)}, false, nil
		}
		live := btx.Bucket(bucketTemplateLiveJobs)
		if byTemplate := btx.Bucket(bucketJobsByTemplateV2); byTemplate != nil {
			counts := map[ulid.ULID]uint64{}
			if err := byTemplate.ForEach(func(k, _ []byte) error { counts[ulidAt(k)]++; return nil }); err != nil {
				return nil, false, err
			}
			for templateID, n := range counts {
				if err := live.Put(id(templateID), binary.BigEndian.AppendUint64(nil, n)); err != nil {
					return nil, false, err
				}
			}
		}
		for _, name := range [][]byte{bucketJobsByTemplateV2, bucketJobsByTeamV2} {
			if err := btx.DeleteBucket(name); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
				return nil, false, err
			}
		}
		return nil, true, nil
	})
}

// upgradeTo4 walks the priority index (the jobs with a priority of their own), chunk by chunk,
// counting each job in its team's and tags' priority counters.
func upgradeTo4(db *bolt.DB) error {
	return migrateInChunks(db, 4, [][]byte{bucketPriorityTimeCounts, bucketPriorityCounts}, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		tx := &txn{tx: btx}
		c := btx.Bucket(bucketJobsByTeamPriority).Cursor()
		n := 0
		var last []byte
		// team + inverted priority + job id -> state; counters change in another bucket, so
		// the cursor walks on safely.
		for k, v := firstAfter(c, after); k != nil && n < migrationChunk; k, v = c.Next() {
			j, err := tx.Job(ulidAt(k[24:]))
			if err != nil {
				return nil, false, fmt.Errorf("job %s: %w", ulidAt(k[24:]), err)
			}
			tx.addPriorityCounts(j, JobState(v[0]), 1)
			last, n = bytes.Clone(k), n+1
		}
		if err := tx.finish(); err != nil {
			return nil, false, err
		}
		return last, n < migrationChunk, nil
	})
}

// upgradeTo5 files every batch in its team's list.
func upgradeTo5(db *bolt.DB) error {
	return migrateInChunks(db, 5, [][]byte{bucketBatchesByTeam}, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		byTeam := btx.Bucket(bucketBatchesByTeam)
		c := btx.Bucket(bucketBatches).Cursor()
		n := 0
		var last []byte
		for k, v := firstAfter(c, after); k != nil && n < migrationChunk; k, v = c.Next() {
			var b Batch
			if err := json.Unmarshal(v, &b); err != nil {
				return nil, false, fmt.Errorf("batch %s: %w", ulidAt(k), err)
			}
			if err := byTeam.Put(key(id(b.TeamID), id(b.ID)), []byte{}); err != nil {
				return nil, false, err
			}
			last, n = bytes.Clone(k), n+1
		}
		return last, n < migrationChunk, nil
	})
}

// upgradeTo6 files every job that has a template under it, with its state.
func upgradeTo6(db *bolt.DB) error {
	return migrateInChunks(db, 6, [][]byte{bucketJobsByTeamTemplate}, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		byTemplate := btx.Bucket(bucketJobsByTeamTemplate)
		c := btx.Bucket(bucketJobs).Cursor()
		n := 0
		var last []byte
		for k, v := firstAfter(c, after); k != nil && n < migrationChunk; k, v = c.Next() {
			j, err := decodeJob(v)
			if err != nil {
				return nil, false, fmt.Errorf("job %s: %w", ulidAt(k), err)
			}
			if j.TemplateID != (ulid.ULID{}) {
				if err := byTemplate.Put(key(id(j.TeamID), id(j.TemplateID), id(j.ID)), stateKey(j.State)); err != nil {
					return nil, false, err
				}
			}
			last, n = bytes.Clone(k), n+1
		}
		return last, n < migrationChunk, nil
	})
}

// upgradeTo7 counts the live chunks of every team by state, walking the live-jobs index.
func upgradeTo7(db *bolt.DB) error {
	return migrateInChunks(db, 7, [][]byte{bucketChunkCounts}, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		tx := &txn{tx: btx}
		c := btx.Bucket(bucketLiveJobs).Cursor()
		var ids []ulid.ULID
		var last []byte
		for k, _ := firstAfter(c, after); k != nil && len(ids) < migrationChunk; k, _ = c.Next() {
			ids, last = append(ids, ulidAt(k[1:])), bytes.Clone(k)
		}
		// Counted after the walk: bbolt cursors may skip keys when their bucket changes.
		for _, jobID := range ids {
			j, err := tx.Job(jobID)
			if err != nil {
				return nil, false, fmt.Errorf("job %s: %w", jobID, err)
			}
			if j.Kind != KindChunk {
				continue
			}
			if err := tx.addJobCounts(j, j.State, 1); err != nil {
				return nil, false, err
			}
		}
		return last, len(ids) < migrationChunk, tx.finish()
	})
}

// upgradeTo8 files every job (chunks apart) in the farm's scope, under its placement tag and by
// its name, walking the jobs.
func upgradeTo8(db *bolt.DB) error {
	return migrateInChunks(db, 8, [][]byte{bucketJobsByName}, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		tx := &txn{tx: btx}
		c := btx.Bucket(bucketJobs).Cursor()
		var jobs []*Job
		var last []byte
		for k, v := firstAfter(c, after); k != nil && len(jobs) < migrationChunk; k, v = c.Next() {
			j, err := decodeJob(v)
			if err != nil {
				return nil, false, fmt.Errorf("job %s: %w", ulidAt(k), err)
			}
			jobs, last = append(jobs, j), bytes.Clone(k)
		}
		// Written after the walk: bbolt cursors may skip keys when their bucket changes.
		for _, j := range jobs {
			if j.Kind == KindChunk {
				continue
			}
			if err := tx.putIndexEntries(farmIndexEntries(new(keyArena), j, stateKey(j.State), id(j.ID))); err != nil {
				return nil, false, err
			}
			if err := tx.addFarmCounts(j, j.State, 1); err != nil {
				return nil, false, err
			}
		}
		return last, len(jobs) < migrationChunk, tx.finish()
	})
}

// upgradeTo9 files again, under the state their clients see, the split jobs waiting on their
// chunks: those the live index holds as pending.
func upgradeTo9(db *bolt.DB) error {
	return migrateInChunks(db, 9, nil, func(btx *bolt.Tx, after []byte) ([]byte, bool, error) {
		tx := &txn{tx: btx}
		c := btx.Bucket(bucketLiveJobs).Cursor()
		// The split jobs waiting on their chunks (pending) and those queued to join them, one
		// state after the other.
		states := []JobState{JobPending, JobQueued}
		at := 0
		if after == nil {
			after = stateKey(states[0])
		}
		for at < len(states)-1 && !hasPrefix(after, stateKey(states[at])) {
			at++
		}
		var jobs []*Job
		var last []byte
		walked := 0
		for walked < migrationChunk && at < len(states) {
			prefix := stateKey(states[at])
			k, _ := firstAfter(c, after)
			for ; k != nil && hasPrefix(k, prefix) && walked < migrationChunk; k, _ = c.Next() {
				walked, last = walked+1, bytes.Clone(k)
				j, err := tx.Job(ulidAt(k[len(prefix):]))
				if err != nil {
					return nil, false, fmt.Errorf("job %s: %w", ulidAt(k[len(prefix):]), err)
				}
				if j.Split() && j.Listed() != j.State {
					jobs = append(jobs, j)
				}
			}
			if walked < migrationChunk {
				at++
				if at < len(states) {
					after = stateKey(states[at])
				}
			}
		}
		// Written after the walk: bbolt cursors may skip keys when their bucket changes.
		for _, j := range jobs {
			if err := tx.deleteJobIndexes(j, filing{state: j.State, listed: j.State}); err != nil {
				return nil, false, err
			}
			if err := tx.writeJobIndexes(j, filedAs(j)); err != nil {
				return nil, false, err
			}
		}
		if last == nil {
			last = after
		}
		return last, at == len(states), tx.finish()
	})
}
