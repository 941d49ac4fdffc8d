package membership

import (
	"log/slog"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence/porttest"
)

const waitLimit = 20 * time.Second

func start(t *testing.T, name, key string, meta Meta, seeds ...string) *Member {
	t.Helper()
	m, err := Start(Config{Name: name, Bind: porttest.FreeAddr(t), Seeds: seeds, Key: key, Meta: meta, Fast: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.list.Shutdown() })
	return m
}

func next(t *testing.T, m *Member, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case ev := <-m.Events():
			if match(ev) {
				return ev
			}
		case <-deadline:
			t.Fatal("no matching membership event")
		}
	}
}

// TestMembersFindAndLoseEachOther: a node joins through the coordinator and learns its actor
// address; the coordinator sees a node that dies (no goodbye) declared dead, and one that
// leaves declared left. A member without the key cannot join.
func TestMembersFindAndLoseEachOther(t *testing.T) {
	const key = "a-cluster-key-of-some-length"
	coord := start(t, "coordinator", key, Meta{Role: RoleCoordinator, Actors: "127.0.0.1:7001"})
	n1 := start(t, "n1", key, Meta{Role: RoleNode, NodeID: "n1", Incarnation: "i1"}, coord.Addr())
	n2 := start(t, "n2", key, Meta{Role: RoleNode, NodeID: "n2"}, coord.Addr())
	ctx := t.Context()
	go n1.Run(ctx)
	go n2.Run(ctx)
	joined := map[string]bool{}
	next(t, coord, func(ev Event) bool { joined[ev.Name] = ev.Alive; return joined["n1"] && joined["n2"] })
	if ev := next(t, n1, func(ev Event) bool { return ev.Meta.Role == RoleCoordinator }); ev.Meta.Actors != "127.0.0.1:7001" {
		t.Fatalf("the node sees the coordinator at %q", ev.Meta.Actors)
	}
	if got := n1.Alive(RoleCoordinator); len(got) != 1 {
		t.Fatalf("alive coordinators %v", got)
	}

	intruder := start(t, "intruder", "not-the-cluster-key-at-all", Meta{Role: RoleNode})
	if _, err := intruder.list.Join([]string{coord.Addr()}); err == nil {
		t.Fatal("a member without the key joined")
	}

	n1.list.Shutdown() // dies without a goodbye
	if ev := next(t, coord, func(ev Event) bool { return ev.Name == "n1" && !ev.Alive }); ev.Left || ev.Meta.Incarnation != "i1" {
		t.Fatalf("dead node event %+v", ev)
	}
	n2.Leave(time.Second)
	if ev := next(t, coord, func(ev Event) bool { return ev.Name == "n2" && !ev.Alive }); !ev.Left {
		t.Fatalf("left node event %+v", ev)
	}
}

func TestShortKeyRefused(t *testing.T) {
	if _, err := Start(Config{Name: "x", Bind: "127.0.0.1:0", Key: "short", Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Fatal("a short cluster key was accepted")
	}
}
