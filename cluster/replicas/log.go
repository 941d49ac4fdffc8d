package replicas

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
	"go.etcd.io/bbolt"
)

// The replicas' log is hashicorp/raft-wal's: segment files appended at their end, each append
// one write and one fsync (raft-boltdb, which earlier releases used, syncs twice and rewrites
// pages of its tree), trimmed by deleting whole segments after a snapshot.
const (
	walDir = "wal"
	// boltLog is the log of earlier releases, moved into the WAL at the first start of this one.
	boltLog  = "raft.db"
	lockFile = "log.lock"
)

// raftLog is the log and raft's stable state (term, vote) of one replica, held by this process
// alone while open.
type raftLog struct {
	*wal.WAL
	lock *fileLock
}

// errLogLocked is returned when another process holds the replica's log.
var errLogLocked = errors.New("another process holds the replicas' log")

// openLog opens the replicas' log in dir, moving an earlier release's log into it first.
func openLog(dir string, logger hclog.Logger) (*raftLog, error) {
	lock, err := lockDir(filepath.Join(dir, lockFile), time.Second)
	if err != nil {
		return nil, err
	}
	opened := false
	defer func() {
		if !opened {
			lock.release()
		}
	}()
	if err := moveBoltLog(dir, logger); err != nil {
		return nil, fmt.Errorf("moving the log of an earlier release (%s) into %s: %w", boltLog, walDir, err)
	}
	path := filepath.Join(dir, walDir)
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	l, err := openWAL(path, logger)
	if err != nil {
		return nil, err
	}
	l.lock, opened = lock, true
	return l, nil
}

func openWAL(path string, logger hclog.Logger) (*raftLog, error) {
	w, err := wal.Open(path, wal.WithLogger(logger.Named("wal")))
	if err != nil {
		return nil, err
	}
	return &raftLog{WAL: w}, nil
}

// GetLog reads the entry at index. raft-wal's tail segment serves the entries it still holds
// after a snapshot took them out of the log; raft must find them gone, as in any log, so that a
// replica that needs them receives the snapshot.
func (l *raftLog) GetLog(index uint64, log *raft.Log) error {
	first, err := l.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return l.WAL.GetLog(index, log)
}

// Close closes the log and lets another process open it.
func (l *raftLog) Close() error {
	err := l.WAL.Close()
	if l.lock != nil {
		l.lock.release()
	}
	return err
}

// moveBoltLog copies an earlier release's log (raft-boltdb) with raft's stable state into a new
// WAL, which takes its place once whole: a start cut short copies again from the beginning.
func moveBoltLog(dir string, logger hclog.Logger) error {
	old := filepath.Join(dir, boltLog)
	if _, err := os.Stat(old); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	target := filepath.Join(dir, walDir)
	if _, err := os.Stat(target); err == nil {
		return os.Remove(old) // moved, and the start stopped before removing it
	}
	partial := target + ".partial"
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	if err := os.Mkdir(partial, 0o700); err != nil {
		return err
	}
	src, err := raftboltdb.New(raftboltdb.Options{Path: old, BoltOptions: &bbolt.Options{Timeout: time.Second, ReadOnly: true}})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openWAL(partial, logger)
	if err != nil {
		return err
	}
	if err := errors.Join(copyLog(dst, src), dst.Close()); err != nil {
		return err
	}
	if err := os.Rename(partial, target); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	logger.Info("moved the replicas' log of an earlier release into its new form", "from", boltLog, "to", walDir)
	return os.Remove(old)
}

// The keys hashicorp/raft keeps in its stable store: the term and the last vote's, numbers
// (which the two stores write in different byte orders), and the last vote's candidate.
var (
	stableNumbers = []string{"CurrentTerm", "LastVoteTerm"}
	stableValues  = []string{"LastVoteCand"}
)

// copyLog copies every entry and raft's stable state from src to the empty dst.
func copyLog(dst *raftLog, src *raftboltdb.BoltStore) error {
	last, err := src.LastIndex()
	if err != nil {
		return err
	}
	if last > 0 {
		if err := migrate.CopyLogs(context.Background(), dst, src, 4<<20, nil); err != nil {
			return err
		}
	}
	if err := copyKeys(stableNumbers, src.GetUint64, dst.SetUint64); err != nil {
		return err
	}
	return copyKeys(stableValues, src.Get, dst.Set)
}

// copyKeys copies the keys that get finds to set.
func copyKeys[T any](keys []string, get func([]byte) (T, error), set func([]byte, T) error) error {
	for _, k := range keys {
		v, err := get([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err == nil {
			err = set([]byte(k), v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

var _ raft.LogStore = (*raftLog)(nil)
var _ raft.StableStore = (*raftLog)(nil)
