package replicas

import (
	"fmt"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
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
