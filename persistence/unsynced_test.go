package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAReplicasStoreSkipsTheDiskWhileItsBootIsMarked: a replica's store commits unsynced with
// the machine's boot marked beside it, and a clean close syncs it and removes the mark.
func TestAReplicasStoreSkipsTheDiskWhileItsBootIsMarked(t *testing.T) {
	if currentBoot() == "" {
		t.Skip("this machine does not name its boot")
	}
	path := filepath.Join(t.TempDir(), "framefarm.db")
	s, err := Open(path, Options{Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	if !s.db.Load().NoSync {
		t.Fatal("a replica's store waits for the disk at each commit")
	}
	if raw, err := os.ReadFile(path + unsyncedSuffix); err != nil || string(raw) != currentBoot()+"\n" {
		t.Fatalf("the mark: %q, %v", raw, err)
	}
	if err := s.Apply(&SetMeta{Name: "kept", Value: "yes"}); err != nil {
		t.Fatal(err)
	}
	// Another opening while the replica runs (a token command) is refused by the lock and
	// leaves the mark alone.
	if _, err := Open(path, Options{OpenTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second opening: %v", err)
	}
	if _, err := os.Stat(path + unsyncedSuffix); err != nil {
		t.Fatalf("a refused opening removed the mark of the running replica: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + unsyncedSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the mark outlived a clean close: %v", err)
	}
	alone, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	if alone.db.Load().NoSync || alone.Meta("kept") != "yes" {
		t.Fatal("reopened alone: unsynced, or the write is gone")
	}
}

// TestAStoreLeftUnsyncedIsKeptInItsBootAndSetAsideAfter: a store left marked (its process died)
// opens whole in the same boot, as a replica's or alone (synced, then unmarked); marked by
// another boot (its machine stopped), a replica sets it aside and starts empty, and any other
// opening refuses it.
func TestAStoreLeftUnsyncedIsKeptInItsBootAndSetAsideAfter(t *testing.T) {
	if currentBoot() == "" {
		t.Skip("this machine does not name its boot")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "framefarm.db")
	leftBy := func(boot string) {
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(&SetMeta{Name: "kept", Value: "yes"})
		s.Close()
		os.WriteFile(path+unsyncedSuffix, []byte(boot+"\n"), 0o600)
	}

	leftBy(currentBoot())
	for _, replica := range []bool{true, false} {
		s, err := Open(path, Options{Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		if s.Meta("kept") != "yes" || s.SetAside() != "" {
			t.Fatalf("replica %v: the store of a process that died in this boot was not kept", replica)
		}
		// Opened alone, the store is synced and needs no mark; a replica's keeps it.
		if _, err := os.Stat(path + unsyncedSuffix); replica == errors.Is(err, os.ErrNotExist) {
			t.Fatalf("replica %v: the mark: %v", replica, err)
		}
		s.Close()
		os.WriteFile(path+unsyncedSuffix, []byte(currentBoot()+"\n"), 0o600)
	}

	leftBy("a-boot-before-the-machine-stopped")
	if _, err := Open(path, Options{}); !errors.Is(err, ErrTornReplica) {
		t.Fatalf("a store torn by its machine opened alone: %v", err)
	}
	s, err := Open(path, Options{Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.SetAside() != path+tornSuffix || !s.Empty() || s.AppliedIndex() != 0 {
		t.Fatalf("a torn store: set aside to %q, empty %v, applied %d", s.SetAside(), s.Empty(), s.AppliedIndex())
	}
	if _, err := os.Stat(path + tornSuffix); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(path + unsyncedSuffix); string(raw) != currentBoot()+"\n" {
		t.Fatalf("the new store's mark: %q", raw)
	}
}
