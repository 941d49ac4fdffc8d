package actors_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/node"
	"github.com/framefarm/framefarm/cluster/nodesim"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// The conformance suite: everything that speaks the node protocol (the real agent, the node
// simulator of the benchmarks, and this package's test node) runs the same scenarios against a
// real coordinator, as River runs one suite over each of its drivers, so none of them can drift
// from the others.

// speaker is a node the suite drives.
type speaker interface {
	// join says hello, answers the coordinator's challenge and waits to be welcomed; it returns
	// the node's id.
	join(t *testing.T) string
	// actor is where the coordinator's messages to the node go.
	actor() *actor.PID
	// assigned waits for the node's next assignment and returns its job.
	assigned(t *testing.T) string
	// finish ends the render of an assigned job; the node reports it done.
	finish(t *testing.T, jobID string)
	// beat sends one heartbeat now, and every unacknowledged result again.
	beat(t *testing.T)
	// acknowledged waits for the coordinator to acknowledge a result and returns its job.
	acknowledged(t *testing.T) string
}

var speakers = map[string]func(f *fixture, id string) speaker{
	"agent":   newAgentSpeaker,
	"nodesim": newSimSpeaker,
	"test node": func(f *fixture, id string) speaker {
		return &testNodeSpeaker{f: f, id: id, pending: map[string]*protocol.Done{}}
	},
}

var conformanceKey = []byte("conformance-key-0123456789")

func conformanceFixture(t *testing.T) *fixture {
	return newFixture(t, actors.Config{ClusterKey: conformanceKey, HeartbeatInterval: time.Second, NodeLease: 5 * time.Second})
}

func TestNodeProtocolConformance(t *testing.T) {
	for name, newSpeaker := range speakers {
		t.Run(name, func(t *testing.T) {
			t.Run("renders, and forgets the result once its job's outcome is durable", func(t *testing.T) {
				f := conformanceFixture(t)
				s := newSpeaker(f, "n1")
				node := s.join(t)
				f.untilNode(node, actors.NodeReady)
				id := f.queue(f.team, 0, 1)[0]
				if got := s.assigned(t); got != id.String() {
					t.Fatalf("assigned %s, queued %s", got, id)
				}
				s.finish(t, id.String())
				if acked := s.acknowledged(t); acked != id.String() {
					t.Fatalf("acknowledged %s", acked)
				}
				// The acknowledgement follows the durable change, whose watchers ran first.
				var finished int
				f.obs.Read(func() { finished = f.obs.count(id, persistence.JobFinished) })
				if finished != 1 {
					t.Fatalf("acknowledged with the job finished %d times", finished)
				}
			})
			t.Run("takes work only under its session", func(t *testing.T) {
				f := conformanceFixture(t)
				s := newSpeaker(f, "n1")
				s.join(t)
				f.coord.ActorSystem().Root.Send(s.actor(), protocol.Wrap(&protocol.Assign{Session: "forged", Seq: 1,
					JobID: ulid.Make().String(), Attempt: 1, Task: protocol.Task{Engine: "test", Output: protocol.Output{Name: "x.mp4"}}}))
				id := f.queue(f.team, 0, 1)[0]
				if got := s.assigned(t); got != id.String() {
					t.Fatalf("took %s, not the coordinator's %s", got, id)
				}
			})
			t.Run("keeps its lease by beating, and says hello again once lost", func(t *testing.T) {
				f := conformanceFixture(t)
				s := newSpeaker(f, "n1")
				node := s.join(t)
				f.untilNode(node, actors.NodeReady)
				// Each move of the clock waits for the lease check it fires to be set again.
				f.waitArmed(time.Second)
				for range 3 {
					f.clock.Advance(3 * time.Second)
					f.waitArmed(time.Second)
					s.beat(t)
					f.untilNode(node, actors.NodeReady)
				}
				if f.obs.refusals() != 0 {
					t.Fatal("a heartbeat was refused")
				}
				f.loseNode(node)
				s.beat(t)
				f.untilNode(node, actors.NodeReady)
				id := f.queue(f.team, 0, 1)[0]
				if got := s.assigned(t); got != id.String() {
					t.Fatalf("assigned %s after the hello again", got)
				}
			})
		})
	}
}

// loseNode moves the clock past the node's lease until the coordinator loses it. A beat the test
// sent may reach the coordinator only after the clock moved, renewing the lease from there; the
// lease check then runs and is set again, and the clock moves once more.
func (f *fixture) loseNode(node string) {
	f.t.Helper()
	deadline := time.After(wait)
	for tries := 0; ; tries++ {
		if tries == 3 {
			f.t.Fatalf("node %s was not lost after %d leases without a beat", node, tries)
		}
		f.clock.Advance(6 * time.Second)
		for armed := false; !armed; {
			lost, changed := f.obs.Check(func() bool { return f.obs.nodes[node] == actors.NodeLost })
			if lost {
				return
			}
			select {
			case d := <-f.clock.Armed:
				armed = d == time.Second
			case <-changed:
			case <-deadline:
				f.t.Fatalf("node %s: neither lost nor its lease checked again", node)
			}
		}
	}
}

// agentSpeaker is the real node agent with a renderer the suite ends, on a clock of its own.
type agentSpeaker struct {
	f    *fixture
	a    *node.Agent
	r    *releasedRenderer
	acks chan string
}

func newAgentSpeaker(f *fixture, id string) speaker {
	s := &agentSpeaker{f: f, r: &releasedRenderer{started: make(chan string, 10), release: map[string]chan struct{}{}}, acks: make(chan string, 10)}
	a, err := node.New(node.Config{NodeID: id, Slots: 1, DataDir: f.t.TempDir(), ClusterKey: f.cfg.ClusterKey,
		OnAcknowledged: func(jobID string, _ int) { s.acks <- jobID }}, []renderer.Renderer{s.r},
		node.Transfers{Internal: http.DefaultClient, External: http.DefaultClient}, clock.NewFake(f.clock.Now()), slog.New(slog.DiscardHandler))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(a.Stop)
	s.a = a
	return s
}

func (s *agentSpeaker) join(t *testing.T) string {
	s.f.runAgent(s.a)
	s.f.untilNode(s.a.Hello().NodeID, actors.NodeReady)
	return s.a.Hello().NodeID
}

func (s *agentSpeaker) actor() *actor.PID {
	h := s.a.Hello()
	return actor.NewPID(h.AgentAddress, h.AgentID)
}

func (s *agentSpeaker) assigned(t *testing.T) string {
	t.Helper()
	select {
	case id := <-s.r.started:
		return id
	case <-time.After(wait):
		t.Fatal("no render started")
		return ""
	}
}

func (s *agentSpeaker) finish(t *testing.T, jobID string) { s.r.finish(jobID) }

// beat wakes the agent's link, which beats and resends (its own clock never moves).
func (s *agentSpeaker) beat(t *testing.T) { s.a.Connect(s.f.coord.NodeGateway()) }

func (s *agentSpeaker) acknowledged(t *testing.T) string {
	return receive(t, s.acks, "acknowledgement")
}

// releasedRenderer renders until the test ends the job's render.
type releasedRenderer struct {
	started chan string
	mu      sync.Mutex
	release map[string]chan struct{}
}

func (r *releasedRenderer) Engine() string { return "test" }

func (r *releasedRenderer) gate(jobID string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.release[jobID] == nil {
		r.release[jobID] = make(chan struct{})
	}
	return r.release[jobID]
}

func (r *releasedRenderer) finish(jobID string) { close(r.gate(jobID)) }

func (r *releasedRenderer) Render(ctx context.Context, task *renderer.Task, _ func(float64)) error {
	r.started <- task.JobID
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.gate(task.JobID):
		return os.WriteFile(filepath.Clean(task.OutputPath), []byte("frames"), 0o600)
	}
}

// simSpeaker is one node of the benchmarks' simulator, on a clock of its own.
type simSpeaker struct {
	f     *fixture
	id    string
	clock *clock.Fake
	sim   *nodesim.Simulator
	jobs  chan string
	acks  chan string
}

func newSimSpeaker(f *fixture, id string) speaker {
	return &simSpeaker{f: f, id: id, clock: clock.NewFake(f.clock.Now()), jobs: make(chan string, 10), acks: make(chan string, 10)}
}

func (s *simSpeaker) join(t *testing.T) string {
	sim, err := nodesim.Start(s.f.coord.ActorSystem(), s.f.coord.NodeGateway(), nodesim.Config{
		Prefix: s.id, Nodes: 1, SlotsPerNode: 1, Engines: []string{"test"}, Render: time.Hour,
		Key: s.f.cfg.ClusterKey, Clock: s.clock,
		OnAssign:       func(jobID string, _ int, _ time.Time) { s.jobs <- jobID },
		OnAcknowledged: func(jobID string, _ int) { s.acks <- jobID },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	s.sim = sim
	return s.id + "-0"
}

func (s *simSpeaker) actor() *actor.PID { return s.sim.Agent(0) }

func (s *simSpeaker) assigned(t *testing.T) string { return receive(t, s.jobs, "assignment") }

// finish moves the simulator's clock past the render's end.
func (s *simSpeaker) finish(t *testing.T, _ string) { s.clock.Advance(time.Hour) }

func (s *simSpeaker) beat(t *testing.T) { s.sim.Beat(0) }

func (s *simSpeaker) acknowledged(t *testing.T) string { return receive(t, s.acks, "acknowledgement") }

// testNodeSpeaker is this package's test node, keeping its results until acknowledged.
type testNodeSpeaker struct {
	f       *fixture
	id      string
	n       *testNode
	mu      sync.Mutex
	taken   map[string]assignment
	pending map[string]*protocol.Done
	seq     uint64
}

func (s *testNodeSpeaker) join(t *testing.T) string {
	s.n = s.f.attachTestNode(s.id, 1)
	s.taken = map[string]assignment{}
	return s.id
}

func (s *testNodeSpeaker) actor() *actor.PID { return s.n.pid }

func (s *testNodeSpeaker) assigned(t *testing.T) string {
	a := s.n.next(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken[a.msg.JobID], s.seq = a, max(s.seq, a.msg.Seq)
	return a.msg.JobID
}

func (s *testNodeSpeaker) finish(t *testing.T, jobID string) {
	s.mu.Lock()
	a := s.taken[jobID]
	done := &protocol.Done{JobID: jobID, Attempt: a.msg.Attempt}
	s.pending[jobID] = done
	s.mu.Unlock()
	a.reply(done)
}

// beat sends a heartbeat holding the unacknowledged results, and them again; an answer that does
// not know the node makes it say hello again.
func (s *testNodeSpeaker) beat(t *testing.T) {
	s.mu.Lock()
	var held []protocol.AttemptStatus
	var again []*protocol.Done
	for _, d := range s.pending {
		held = append(held, protocol.AttemptStatus{JobID: d.JobID, Attempt: d.Attempt, Percent: 100})
		again = append(again, d)
	}
	seq := s.seq
	s.mu.Unlock()
	if ack := s.n.heartbeat(seq, held...); !ack.Known {
		w, err := s.n.sayHello()
		if err != nil {
			t.Fatal(err)
		}
		s.n.session, s.seq = w.Session, w.Seq
		return
	}
	for _, d := range again {
		s.n.send(d)
	}
}

func (s *testNodeSpeaker) acknowledged(t *testing.T) string {
	t.Helper()
	for {
		select {
		case ack := <-s.n.acks:
			s.mu.Lock()
			_, held := s.pending[ack.JobID]
			delete(s.pending, ack.JobID)
			s.mu.Unlock()
			if held {
				return ack.JobID
			}
		case <-time.After(wait):
			t.Fatal("no acknowledgement")
			return ""
		}
	}
}

// receive waits for a value on ch.
func receive[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}
