package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout of records and indexes this build writes. Open upgrades an older
// store in place, once; a store written by a newer build is refused rather than misread.
//
//	1  the layout before versions were recorded
//	2  the live-jobs index carries each queued job's queue entry (restart without records)
const SchemaVersion = 2

const metaSchemaVersion = "schema_version"

// ErrNewerSchema means the store was written by a newer framefarm.
var ErrNewerSchema = errors.New("the database was written by a newer framefarm")

// migrations[v] upgrades a store from version v to v+1. A migration works in chunks, each its
// own transaction, and may be run again from the start: a process killed halfway redoes it at
// the next Open, and the version moves only in the transaction of the last chunk.
var migrations = map[int]func(db *bolt.DB) error{
	1: fillQueueEntries,
}

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

// fillQueueEntries (1 -> 2) writes the queue entry of every queued job into the live-jobs index.
func fillQueueEntries(db *bolt.DB) error {
	prefix := stateKey(JobQueued)
	after := prefix
	for {
		var last []byte
		err := db.Update(func(btx *bolt.Tx) error {
			live, jobs := btx.Bucket(bucketLiveJobs), btx.Bucket(bucketJobs)
			type fill struct{ k, v []byte }
			var fills []fill
			c := live.Cursor()
			k, _ := c.Seek(after)
			if k != nil && bytes.Equal(k, after) {
				k, _ = c.Next()
			}
			for ; k != nil && hasPrefix(k, prefix) && len(fills) < migrationChunk; k, _ = c.Next() {
				raw := jobs.Get(k[1:])
				if raw == nil {
					return fmt.Errorf("queued job %s has no record", ulidAt(k[1:]))
				}
				j, err := decodeJob(raw)
				if err != nil {
					return err
				}
				fills = append(fills, fill{bytes.Clone(k), encodeQueueEntry(j.QueueEntry())})
			}
			// Written after the walk: bbolt cursors may skip keys when their bucket changes.
			for _, f := range fills {
				if err := live.Put(f.k, f.v); err != nil {
					return err
				}
				last = f.k
			}
			if len(fills) < migrationChunk {
				last = nil
				return btx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("2"))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if afterMigrationChunk != nil {
			if err := afterMigrationChunk(); err != nil {
				return err
			}
		}
		if last == nil {
			return nil
		}
		after = last
	}
}
