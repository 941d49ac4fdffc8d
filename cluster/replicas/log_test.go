package replicas

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// writeBoltLog writes the log an earlier release left: entries 5 to 104 (those before went into
// a snapshot) and raft's term and vote.
func writeBoltLog(t *testing.T, dir string) {
	t.Helper()
	old, err := raftboltdb.NewBoltStore(filepath.Join(dir, boltLog))
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(5); i <= 104; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d", i)})
	}
	if err := old.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := old.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := old.SetUint64([]byte("LastVoteTerm"), 6); err != nil {
		t.Fatal(err)
	}
	if err := old.Set([]byte("LastVoteCand"), []byte("c2")); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkMovedLog opens the log in dir and checks it holds what writeBoltLog wrote, and that the
// earlier release's files are gone.
func checkMovedLog(t *testing.T, dir string) {
	t.Helper()
	l, err := openLog(dir, newRaftLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if first != 5 || last != 104 {
		t.Fatalf("the moved log runs from %d to %d, not 5 to 104", first, last)
	}
	for _, i := range []uint64{5, 50, 104} {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil || string(e.Data) != fmt.Sprintf("entry %d", i) || e.Term != 3 {
			t.Fatalf("entry %d: %+v, %v", i, e, err)
		}
	}
	term, err1 := l.GetUint64([]byte("CurrentTerm"))
	voteTerm, err2 := l.GetUint64([]byte("LastVoteTerm"))
	cand, err3 := l.Get([]byte("LastVoteCand"))
	if term != 7 || voteTerm != 6 || string(cand) != "c2" || err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("raft's state after the move: term %d, vote in %d for %q (%v %v %v)", term, voteTerm, cand, err1, err2, err3)
	}
	for _, gone := range []string{boltLog, walDir + ".partial"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Fatalf("%s is left after the move (%v)", gone, err)
		}
	}
}

// TestTheLogOfAnEarlierReleaseMovesIntoTheWAL: a replica's raft-boltdb log, as earlier releases
// wrote it, is moved into the WAL at the first open, every entry and raft's term and vote with
// it; a move cut short (its partial copy left) starts again, and one that stopped before removing
// the old log removes it.
func TestTheLogOfAnEarlierReleaseMovesIntoTheWAL(t *testing.T) {
	dir := t.TempDir()
	writeBoltLog(t, dir)
	checkMovedLog(t, dir)
	checkMovedLog(t, dir) // and opens as it is the next time

	cut := t.TempDir()
	writeBoltLog(t, cut)
	if err := os.MkdirAll(filepath.Join(cut, walDir+".partial"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(cut, walDir+".partial", "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o600)
	checkMovedLog(t, cut)

	unremoved := t.TempDir()
	writeBoltLog(t, unremoved)
	checkMovedLog(t, unremoved)
	writeBoltLog(t, unremoved) // the old log, as a move that stopped before removing it left it
	checkMovedLog(t, unremoved)
}

// TestALogHeldByAProcessIsNotOpenedTwice: the log of a running replica is refused to another
// opener, which would otherwise wait on the WAL's files for ever.
func TestALogHeldByAProcessIsNotOpenedTwice(t *testing.T) {
	dir := t.TempDir()
	logger := newRaftLogger(slog.New(slog.DiscardHandler))
	l, err := openLog(dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openLog(dir, logger); err != errLogLocked {
		t.Fatalf("opened twice: %v", err)
	}
	l.Close()
	again, err := openLog(dir, logger)
	if err != nil {
		t.Fatalf("after the close: %v", err)
	}
	again.Close()
}

// TestEntriesASnapshotTookOutOfTheLogAreGone: entries deleted from the head of the log are not
// found, though the WAL's tail segment still holds them: raft sends a replica that needs them
// the snapshot instead.
func TestEntriesASnapshotTookOutOfTheLogAreGone(t *testing.T) {
	l, err := openLog(t.TempDir(), newRaftLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var logs []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	if err := l.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRange(1, 60); err != nil {
		t.Fatal(err)
	}
	var e raft.Log
	if err := l.GetLog(30, &e); err != raft.ErrLogNotFound {
		t.Fatalf("an entry taken out of the log: %v", err)
	}
	if err := l.GetLog(61, &e); err != nil || e.Index != 61 {
		t.Fatalf("the first entry left: %+v, %v", e, err)
	}
}
