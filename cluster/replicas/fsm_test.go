package replicas

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// waitHeld waits until a follower holds the entry at index, or has applied it.
func waitHeld(t *testing.T, m *member, index uint64) {
	t.Helper()
	f := m.replica.fsm
	has := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return m.store.AppliedIndex() >= index || (len(f.held) > 0 && f.held[len(f.held)-1].Index >= index)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !has() {
		if time.Now().After(deadline) {
			t.Fatalf("entry %d never reached the follower", index)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// written writes name=v through the leader and returns the index it was applied at there.
func (s *set) written(name string) uint64 {
	s.t.Helper()
	s.write(name, "v")
	_, leader := s.leader()
	return leader.store.AppliedIndex()
}

// TestAFollowerHoldsWhatItAppliesTogether: a follower holds the entries committed and applies
// them together once the hold is over, at once when a read waits for them, before a snapshot is
// taken, and when it stops.
func TestAFollowerHoldsWhatItAppliesTogether(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	fake := clock.NewFake(time.Now())
	s.clock = fake
	for _, id := range []string{"c1", "c2", "c3"} {
		s.start(id, s.open(id))
	}
	leaderID, _ := s.leader()
	var followerID string
	for id := range s.members {
		if id != leaderID {
			followerID = id
		}
	}
	follower := s.members[followerID]

	held := s.written("held")
	waitHeld(t, follower, held)
	if follower.store.Meta("held") != "" {
		t.Fatal("the follower applied an entry as it came")
	}
	fake.Advance(time.Hour)
	if !follower.store.WaitApplied(held, 10*time.Second) || follower.store.Meta("held") != "v" {
		t.Fatal("the follower did not apply what it held once the hold was over")
	}

	read := s.written("read")
	waitHeld(t, follower, read)
	if got := s.read(followerID, "read"); got != "v" {
		t.Fatalf("a read on the follower found %q", got)
	}

	snapped := s.written("snapshot")
	waitHeld(t, follower, snapped)
	if err := follower.replica.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if follower.store.Meta("snapshot") != "v" {
		t.Fatal("a snapshot was taken of records without the entries raft handed over")
	}

	stopped := s.written("stop")
	waitHeld(t, follower, stopped)
	s.stop(followerID)
	store := s.open(followerID)
	defer store.Close()
	if store.Meta("stop") != "v" {
		t.Fatal("a follower that stopped left held entries unapplied")
	}
}

// TestANewLeaderAnswersWhatTheLastOneAcknowledged: the followers hold a write their leader
// acknowledged; the leader lost, the one elected applies it before it answers a read, its own
// or another replica's question.
func TestANewLeaderAnswersWhatTheLastOneAcknowledged(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	s.clock = clock.NewFake(time.Now()) // followers hold what they are handed until made to apply it
	for _, id := range []string{"c1", "c2", "c3"} {
		s.start(id, s.open(id))
	}
	for i := range 3 {
		index := s.written(fmt.Sprint("k", i))
		first, _ := s.leader()
		for id, m := range s.members {
			if id != first {
				waitHeld(t, m, index)
			}
		}
		s.stop(first)
		next, leader := s.leader()
		if err := leader.replica.CatchUp(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := leader.store.Meta(fmt.Sprint("k", i)); got != "v" {
			t.Fatalf("the new leader read k%d as %q", i, got)
		}
		for id := range s.members {
			if id != next {
				if got := s.read(id, fmt.Sprint("k", i)); got != "v" {
					t.Fatalf("replica %s read k%d as %q after the leader changed", id, i, got)
				}
			}
		}
		s.start(first, s.open(first))
	}
}

// TestTheLeaderAppliesItsEntryWithTheNext: an entry the leader proposed waits, committed, for
// the next it proposed when that one is on its way, and is applied with it in one transaction;
// alone, it is applied at once; held, it is applied once ownHold passes, or at once for a read.
func TestTheLeaderAppliesItsEntryWithTheNext(t *testing.T) {
	store, err := persistence.Open(filepath.Join(t.TempDir(), "framefarm.db"), persistence.Options{Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fake := clock.NewFake(time.Now())
	r := &Replica{cfg: Config{Store: store, Fail: func(err error) { t.Fatal(err) }}, log: slog.New(slog.DiscardHandler)}
	f := &fsm{r: r, hold: time.Hour, clock: fake}
	r.fsm = f
	index := uint64(0)
	// commit proposes name=v, commits it with more (another entry follows), and hands it to the
	// state machine.
	commit := func(name string, more bool) *proposal {
		t.Helper()
		cmd := &persistence.SetMeta{Name: name, Value: "v"}
		data, err := persistence.EncodeEntry(cmd)
		if err != nil {
			t.Fatal(err)
		}
		p := &proposal{commands: []persistence.Command{cmd}, committed: func() bool { return more }, applied: make(chan struct{})}
		r.proposals.Store(&data[0], p)
		index++
		f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: data}})
		return p
	}
	applied := func(p *proposal) bool {
		select {
		case <-p.applied:
			return p.result != nil
		default:
			return false
		}
	}

	first := commit("first", true)
	if applied(first) || store.Meta("first") != "" {
		t.Fatal("an entry the next follows at once was applied alone")
	}
	second := commit("second", true)
	if !applied(first) || !applied(second) || store.AppliedIndex() != 2 {
		t.Fatal("the next entry did not apply the one held with it")
	}
	if alone := commit("alone", false); !applied(alone) {
		t.Fatal("an entry no other follows waited")
	}

	timed := commit("timed", true)
	fake.Advance(ownHold - time.Millisecond)
	if applied(timed) {
		t.Fatal("a held entry was applied before its hold was over")
	}
	fake.Advance(time.Millisecond)
	<-timed.applied
	if store.Meta("timed") != "v" {
		t.Fatal("a held entry was not applied once its hold was over")
	}

	read := commit("read", true)
	f.read()()
	if !applied(read) {
		t.Fatal("a read waited on an entry the leader held")
	}
}
