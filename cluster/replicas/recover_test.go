package replicas

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
)

// TestASurvivorRecoversAlone: of three replicas two are lost for good; the third, stopped, is
// recovered as a set of one with every write, leads alone once started, and writes again.
func TestASurvivorRecoversAlone(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	for _, id := range []string{"c1", "c2", "c3"} {
		s.start(id, s.open(id))
	}
	for i := range 30 {
		s.write(fmt.Sprintf("k%d", i), "v")
	}
	s.read("c2", "k29")
	for _, id := range []string{"c1", "c3", "c2"} {
		s.stop(id)
	}

	store := s.open("c2")
	if _, err := Recover(RecoverConfig{ID: "c2", Addr: s.peers[1].Addr, Dir: filepath.Join(s.dirs["c2"], "raft"), Store: store,
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	s.start("c2", s.open("c2"))
	if id, _ := s.leader(); id != "c2" {
		t.Fatalf("%s leads", id)
	}
	for i := range 30 {
		if v := s.read("c2", fmt.Sprintf("k%d", i)); v != "v" {
			t.Fatalf("k%d is %q after the recovery", i, v)
		}
	}
	s.write("after", "1")
	if st := s.members["c2"].replica.Status(); len(st.Replicas) != 1 {
		t.Fatalf("the set after the recovery: %+v", st.Replicas)
	}
}

func TestARunningReplicaIsNotRecovered(t *testing.T) {
	s := newSet(t, "c1")
	m := s.start("c1", s.open("c1"))
	s.leader()
	_, err := Recover(RecoverConfig{ID: "c1", Addr: s.peers[0].Addr, Dir: filepath.Join(s.dirs["c1"], "raft"), Store: m.store,
		Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, ErrRunning) {
		t.Fatalf("recovering a running replica: %v", err)
	}
}
