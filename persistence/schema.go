package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout of records and indexes this build writes. Open upgrades an older
// store in place, once; a store written by a newer build is refused rather than misread.
//
//	1  the layout before versions were recorded
//	2  the live-jobs index carries each queued job's queue entry (restart without records), jobs
//	   are counted by creation time (listings by rank), terminal top-level jobs are filed by
//	   the time they ended (retention)
const SchemaVersion = 2

const metaSchemaVersion = "schema_version"

// ErrNewerSchema means the store was written by a newer framefarm.
var ErrNewerSchema = errors.New("the database was written by a newer framefarm")

// migrations[v] upgrades a store from version v to v+1. A migration works in chunks, each its
// own transaction that also records where it got to, so a process killed halfway goes on from
// there at the next Open; the version moves in the transaction of the last chunk.
var migrations = map[int]func(db *bolt.DB) error{
	1: upgradeTo2,
}

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

// upgradeTo2 walks every job in the team-and-state index: it counts the job by creation time,
// writes a queued job's queue entry into the live-jobs index, and files a terminal top-level job
// in the ended-jobs index (retention).
func upgradeTo2(db *bolt.DB) error {
	for {
		done := false
		err := db.Update(func(btx *bolt.Tx) error {
			meta := btx.Bucket(bucketMeta)
			after := meta.Get([]byte(metaMigrationCursor))
			if after == nil {
				// First chunk: counters from an earlier attempt that never committed a chunk
				// cannot exist, but start from nothing all the same.
				if err := btx.DeleteBucket(bucketJobTimeCounts); err != nil {
					return err
				}
				if _, err := btx.CreateBucket(bucketJobTimeCounts); err != nil {
					return err
				}
			}
			tx := &Tx{tx: btx}
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
				if err := tx.addTimeCounts(&Job{ID: st.job, TeamID: st.team}, st.state, 1); err != nil {
					return err
				}
				if st.state != JobQueued && !st.state.Terminal() {
					continue
				}
				j, err := tx.Job(st.job)
				if err != nil {
					return fmt.Errorf("job %s: %w", st.job, err)
				}
				switch {
				case st.state == JobQueued:
					err = btx.Bucket(bucketLiveJobs).Put(key(stateKey(JobQueued), id(st.job)), encodeQueueEntry(j.QueueEntry()))
				case j.ParentID == (ulid.ULID{}):
					err = btx.Bucket(bucketJobsByEnd).Put(endKey(j), []byte{})
				}
				if err != nil {
					return err
				}
			}
			if err := tx.finish(); err != nil {
				return err
			}
			if len(steps) < migrationChunk {
				done = true
				if err := meta.Delete([]byte(metaMigrationCursor)); err != nil {
					return err
				}
				return meta.Put([]byte(metaSchemaVersion), []byte("2"))
			}
			return meta.Put([]byte(metaMigrationCursor), last)
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
