package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// A replica's store commits without waiting for the disk. The replicas' log, on disk on a
// quorum before a write is acknowledged, holds every entry since the last snapshot, and the
// store records the last entry it applied, so what the store lost comes back from the log. A
// process that dies loses nothing it handed the kernel (the page cache outlives it); a machine
// that stops may leave the file torn, pages of a commit written and others not. So while a
// store is written this way, a file beside it names the machine's boot: opened under another
// boot, the store is set aside and the replica rebuilds it from its snapshot and log.
//
// Where the boot cannot be named, a replica's store waits for the disk at each commit.

// unsyncedSuffix names the file beside a store that is written without waiting for the disk.
const unsyncedSuffix = ".unsynced"

// tornSuffix names a store set aside after its machine stopped while it was written unsynced.
const tornSuffix = ".torn"

// bootIDFile names this boot of a Linux machine; it changes at every start.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

func currentBoot() string {
	raw, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// ErrTornReplica is returned when a store a replica wrote unsynced is opened after its
// machine stopped, by other than a replica, which could rebuild it.
var ErrTornReplica = errors.New("the machine stopped while this replica's store was written without waiting for the disk")

// setAsideTorn moves a store marked by another boot out of the way of a replica, which then
// starts empty and rebuilds it, and refuses it to anyone else. No process can hold such a store
// (the machine stopped since its mark), so this runs before the store's lock is taken.
func setAsideTorn(path string, replica bool) (setAside bool, err error) {
	raw, err := os.ReadFile(path + unsyncedSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if boot := currentBoot(); boot != "" && strings.TrimSpace(string(raw)) == boot {
		return false, nil
	}
	if !replica {
		return false, fmt.Errorf("%w: %s may be torn; start this coordinator as the replica it was, which rebuilds it from the replicas' log", ErrTornReplica, path)
	}
	if err := os.Rename(path, path+tornSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// markUnsynced, with the store's lock held, marks a replica's store with this boot before its
// first unsynced commit and reports whether its commits may skip the disk. Opened by other than
// a replica, a store left marked in this boot (its process died; the page cache holds every
// write) is synced once and needs no mark from now on.
func markUnsynced(db *bolt.DB, path string, replica bool) (unsynced bool, err error) {
	marker := path + unsyncedSuffix
	boot := currentBoot()
	if !replica || boot == "" {
		if _, err := os.Stat(marker); err == nil {
			if err := db.Sync(); err != nil {
				return false, err
			}
		}
		return false, removeMarker(marker)
	}
	if err := writeSynced(marker, []byte(boot+"\n")); err != nil {
		return false, err
	}
	return true, nil
}

// closeUnsynced syncs a store written unsynced, which then needs its mark no more.
func (s *Store) closeUnsynced() error {
	if !s.unsynced {
		return nil
	}
	if err := s.db.Load().Sync(); err != nil {
		return err
	}
	return removeMarker(s.path + unsyncedSuffix)
}

func removeMarker(marker string) error {
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// writeSynced writes a small file and makes sure it and its name are on disk.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
