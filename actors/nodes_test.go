package actors_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
)

// heartbeat sends one heartbeat holding the given attempts and returns the answer.
func (n *testNode) heartbeat(seq uint64, held ...protocol.AttemptStatus) *protocol.HeartbeatAck {
	n.f.t.Helper()
	system := n.f.coord.ActorSystem()
	hb := &protocol.Heartbeat{Sender: protocol.Sender{NodeID: n.id, Session: n.session}, Incarnation: "1", Seq: seq, Running: held}
	res, err := system.Root.RequestFuture(n.f.coord.NodeGateway(), protocol.Wrap(hb), wait).Result()
	if err != nil {
		n.f.t.Fatal(err)
	}
	msg, err := protocol.Open(res.(*protocol.Envelope))
	if err != nil {
		n.f.t.Fatal(err)
	}
	return msg.(*protocol.HeartbeatAck)
}

func (f *fixture) nodeState(id string) actors.NodeState {
	for _, n := range f.coord.Nodes() {
		if n.ID == id {
			return n.State
		}
	}
	return ""
}

// untilNode waits for a node's state, told by the recorder.
func (f *fixture) untilNode(id string, state actors.NodeState) {
	f.t.Helper()
	f.obs.until(f.t, "node "+id+" "+string(state), func() bool { return f.obs.nodes[id] == state })
}

func (r *recorder) count(id ulid.ULID, state persistence.JobState) int {
	n := 0
	for _, s := range r.states[id] {
		if s == state {
			n++
		}
	}
	return n
}

// TestLeaseExpiryRequeuesAndFences: a node whose heartbeats stop loses its lease on the
// injected clock; its job runs again elsewhere as attempt 2 and what the lost node still says
// of attempt 1 is rejected.
func TestLeaseExpiryRequeuesAndFences(t *testing.T) {
	f := newFixture(t, actors.Config{HeartbeatInterval: time.Second, NodeLease: 5 * time.Second})
	n1 := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	first := n1.next(t)
	if ack := n1.heartbeat(1, protocol.AttemptStatus{JobID: id.String(), Attempt: 1, Percent: 10}); !ack.Known || len(ack.Abandon) > 0 {
		t.Fatalf("heartbeat answer %+v", ack)
	}
	f.advanceWhenArmed(time.Second) // within the lease: nothing happens
	if f.nodeState("n1") != actors.NodeReady {
		t.Fatalf("node is %s after one quiet second", f.nodeState("n1"))
	}
	f.clock.Advance(5 * time.Second)
	f.obs.until(t, "the job queued again", func() bool { return f.obs.count(id, persistence.JobQueued) == 2 })
	f.untilNode("n1", actors.NodeLost)

	first.reply(&protocol.Done{JobID: id.String(), Attempt: 1})
	f.obs.until(t, "the late report rejected", func() bool { return f.obs.stale == 1 })
	if ack := n1.heartbeat(1); ack.Known {
		t.Fatal("a lost node's heartbeat was taken")
	}

	n2 := f.attachTestNode("n2", 1)
	if err := f.coord.ForgetNode("n2"); !errors.Is(err, actors.ErrNodeActive) {
		t.Fatalf("forgetting a ready node: %v", err)
	}
	if err := f.coord.ForgetNode("n1"); err != nil {
		t.Fatalf("forgetting a lost node: %v", err)
	}
	if nodes := f.coord.Nodes(); len(nodes) != 1 || nodes[0].ID != "n2" {
		t.Fatalf("nodes after forgetting n1: %+v", nodes)
	}
	second := n2.next(t)
	if second.msg.Attempt != 2 {
		t.Fatalf("attempt %d", second.msg.Attempt)
	}
	second.reply(&protocol.Done{JobID: id.String(), Attempt: 2})
	f.obs.reached(t, id, persistence.JobFinished)
	j := f.job(id)
	if len(j.Failures) != 1 || j.Failures[0].Node != "n1" || !strings.Contains(j.Failures[0].Error, "lease expired") {
		t.Fatalf("failures %+v", j.Failures)
	}
}

// TestHeartbeatTellsLostAndStaleAttempts: an attempt the node no longer holds is lost at once;
// one it holds that is not its assignment is abandoned.
func TestHeartbeatTellsLostAndStaleAttempts(t *testing.T) {
	f := newFixture(t, actors.Config{NodeLease: time.Hour})
	n1 := f.attachTestNode("n1", 2)
	ids := f.queue(f.team, 0, 2)
	n1.next(t)
	n1.next(t)
	// The node has seen both assignments but holds only the first, plus a stranger.
	stranger := protocol.AttemptStatus{JobID: ulid.Make().String(), Attempt: 4, Percent: 50}
	ack := n1.heartbeat(2, protocol.AttemptStatus{JobID: ids[0].String(), Attempt: 1}, stranger)
	if len(ack.Abandon) != 1 || ack.Abandon[0].JobID != stranger.JobID {
		t.Fatalf("abandon %+v", ack.Abandon)
	}
	f.obs.until(t, "the missing attempt queued again", func() bool { return f.obs.count(ids[1], persistence.JobQueued) == 2 })
	if again := n1.next(t); again.msg.JobID != ids[1].String() || again.msg.Attempt != 2 {
		t.Fatalf("re-assigned %s attempt %d", again.msg.JobID, again.msg.Attempt)
	}
	// The same run of the node saying hello again counts on from the three assignments.
	if n1 = f.attachTestNode("n1", 2); n1.welcomeSeq != 3 {
		t.Fatalf("welcome after three assignments says %d", n1.welcomeSeq)
	}
}

// TestNodeQuarantinedWhenItsSelfTestFails: renders of different jobs failing in a row by what
// looks like the node's own fault make it test itself; its test failing stops its work until an
// operator clears it. One job failing again does not count twice.
func TestNodeQuarantinedWhenItsSelfTestFails(t *testing.T) {
	f := newFixture(t, actors.Config{NodeFailureLimit: 2, MaxAttempts: 2, NodeLease: time.Hour})
	n1 := f.attachTestNode("n1", 1)
	a := f.queue(f.team, 0, 1)[0]
	first := n1.next(t)
	first.reply(&protocol.Failed{JobID: a.String(), Attempt: 1, Error: "flaky", Retryable: true, Fault: protocol.FaultNode})
	again := n1.next(t) // the only node: the job comes back to it
	again.reply(&protocol.Failed{JobID: a.String(), Attempt: 2, Error: "flaky", Retryable: true, Fault: protocol.FaultNode})
	f.obs.reached(t, a, persistence.JobFailed)
	if f.nodeState("n1") != actors.NodeReady {
		t.Fatal("one job failing twice quarantined the node")
	}
	b := f.queue(f.team, 0, 1)[0]
	n1.next(t).reply(&protocol.Failed{JobID: b.String(), Attempt: 1, Error: "cannot open the GPU", Fault: protocol.FaultNode})
	// Two different jobs failed: the node tests itself, and fails.
	select {
	case test := <-n1.selfTests:
		if !slices.Equal(test.Engines, []string{"test"}) || test.Session != n1.session {
			t.Fatalf("self-test asked: %+v", test)
		}
	case <-time.After(wait):
		t.Fatal("no self-test was asked of the node")
	}
	f.untilNode("n1", actors.NodeTesting)
	n1.send(&protocol.SelfTested{Passed: false, Error: "the GPU is gone"})
	f.untilNode("n1", actors.NodeQuarantined)
	c := f.queue(f.team, 0, 1)[0]
	select {
	case x := <-n1.assigned:
		t.Fatalf("a quarantined node got %s", x.msg.JobID)
	default:
	}
	// The quarantine holds when the node says hello again (it restarted).
	n1 = f.attachTestNode("n1", 1)
	if f.nodeState("n1") != actors.NodeQuarantined {
		t.Fatalf("after a new hello the node is %s", f.nodeState("n1"))
	}
	info, err := f.coord.ClearNode("n1")
	if err != nil || info.State != actors.NodeReady {
		t.Fatalf("clear: %+v %v", info, err)
	}
	if x := n1.next(t); x.msg.JobID != c.String() {
		t.Fatalf("unexpected job %s", x.msg.JobID)
	}
	if _, err := f.coord.ClearNode("nosuch"); err == nil {
		t.Fatal("clearing an unknown node succeeded")
	}
}

// TestHelloDuringAnOfferKeepsTheSlotTaken: a node saying hello again while a job is on its way
// to it (offered, not yet assigned) still has that slot taken: the next job waits instead of
// being sent to a node with no free slot.
func TestHelloDuringAnOfferKeepsTheSlotTaken(t *testing.T) {
	f := newFixture(t, actors.Config{NodeLease: time.Hour})
	n1 := f.attachTestNode("n1", 1)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
				if _, err := n1.sayHello(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	ids := f.queue(f.team, 0, 2)
	first := n1.next(t)
	close(stop)
	<-stopped
	// Every hello's effect on the scheduler was sent before its welcome: the queue depth now
	// says whether a second job went to the full node.
	f.waitQueued(1)
	w, err := n1.sayHello()
	if err != nil {
		t.Fatal(err)
	}
	n1.session = w.Session
	first.reply(&protocol.Done{JobID: first.msg.JobID, Attempt: 1})
	second := n1.next(t)
	if second.msg.JobID == first.msg.JobID || !slices.Contains(ids, ulid.MustParse(second.msg.JobID)) || second.msg.Attempt != 1 {
		t.Fatalf("second assignment %s attempt %d", second.msg.JobID, second.msg.Attempt)
	}
}

// TestJobAvoidsTheNodeItFailedOn: a retried job goes to another node when one can take it.
func TestJobAvoidsTheNodeItFailedOn(t *testing.T) {
	f := newFixture(t, actors.Config{NodeLease: time.Hour})
	n1 := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	first := n1.next(t)
	n2 := f.attachTestNode("n2", 1)
	first.reply(&protocol.Failed{JobID: id.String(), Attempt: 1, Error: "out of memory", Retryable: true})
	second := n2.next(t)
	if second.msg.JobID != id.String() || second.msg.Attempt != 2 {
		t.Fatalf("n2 got %s attempt %d", second.msg.JobID, second.msg.Attempt)
	}
}

// TestNodeRequiringTagsTakesOnlyTaggedJobs: a node that requires tags renders only jobs
// carrying all of them; untagged work waits for another node.
func TestNodeRequiringTagsTakesOnlyTaggedJobs(t *testing.T) {
	f := newFixture(t, actors.Config{NodeLease: time.Hour})
	gpu := f.attachTestNode("gpu", 2, func(h *protocol.Hello) { h.RequireTags = []string{"gpu"} })
	plain := f.queue(f.team, 5, 1)[0]
	tagged := f.ids.New(f.clock.Now())
	err := f.coord.CreateJobs([]*persistence.Job{{ID: tagged, TeamID: f.team, Kind: persistence.KindRender, Engine: "test",
		State: persistence.JobQueued, Tags: []string{"hd", "gpu"}, OutputName: "x.mp4", CreatedAt: f.clock.Now()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := gpu.next(t); a.msg.JobID != tagged.String() {
		t.Fatalf("the gpu node got %s", a.msg.JobID)
	}
	other := f.attachTestNode("other", 1)
	if a := other.next(t); a.msg.JobID != plain.String() {
		t.Fatalf("the other node got %s", a.msg.JobID)
	}
}

// TestGatewayRefusesWhatItCannotOpen: an unknown kind is answered with an error; a hello is
// challenged first, and one with a bad id, no slots or without the cluster key is refused; a
// hello played again, or answering a challenge nobody gave, is refused without an answer.
func TestGatewayRefusesWhatItCannotOpen(t *testing.T) {
	key := []byte("0123456789abcdef")
	f := newFixture(t, actors.Config{ClusterKey: key})
	ask := func(msg any) any {
		t.Helper()
		answer, err := f.askGateway(msg)
		if err != nil {
			t.Fatal(err)
		}
		return answer
	}
	askEnvelope := func(env *protocol.Envelope) any {
		res, err := f.coord.ActorSystem().Root.RequestFuture(f.coord.NodeGateway(), env, wait).Result()
		if err != nil {
			t.Fatal(err)
		}
		msg, err := protocol.Open(res.(*protocol.Envelope))
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	if e, ok := askEnvelope(&protocol.Envelope{Kind: "telemetry", Version: 9}).(*protocol.Error); !ok || e.Kind != "telemetry" {
		t.Fatalf("unknown kind answered %+v", e)
	}
	if e, ok := askEnvelope(&protocol.Envelope{Kind: "hello", Version: 1, Payload: []byte("{not json")}).(*protocol.Error); !ok {
		t.Fatalf("bad payload answered %+v", e)
	}
	challenged := func(h protocol.Hello, proofKey []byte) *protocol.Hello {
		t.Helper()
		c, ok := ask(&h).(*protocol.Challenge)
		if !ok || c.Nonce == "" {
			t.Fatalf("a hello without a nonce was not challenged: %+v", c)
		}
		h.Nonce = c.Nonce
		h.KeyProof = protocol.HelloProof(proofKey, h.Nonce, &h)
		return &h
	}
	good := protocol.Hello{NodeID: "n1", Slots: 1, AgentAddress: "nonhost", AgentID: "a", Incarnation: "1"}
	for name, h := range map[string]*protocol.Hello{
		"no key":    func() *protocol.Hello { h := challenged(good, key); h.KeyProof = ""; return h }(),
		"bad id":    challenged(protocol.Hello{NodeID: "../etc", Slots: 1, AgentAddress: "nonhost", AgentID: "a", Incarnation: "1"}, key),
		"no slots":  challenged(protocol.Hello{NodeID: "n1", AgentAddress: "nonhost", AgentID: "a", Incarnation: "1"}, key),
		"wrong key": challenged(good, []byte("another key 12345")),
	} {
		if w := ask(h).(*protocol.Welcome); w.Accepted || w.Reason == "" || w.Nonce != h.Nonce {
			t.Errorf("%s: welcomed %+v", name, w)
		}
	}
	proper := challenged(good, key)
	w := ask(proper).(*protocol.Welcome)
	if !w.Accepted || w.Nonce != proper.Nonce || !protocol.CheckWelcomeProof(key, "n1", w) {
		t.Fatalf("a node with the key was not welcomed properly: %+v", w)
	}
	refused := f.obs.refusals()
	for name, h := range map[string]*protocol.Hello{
		"replayed": proper,
		"invented nonce": func() *protocol.Hello {
			h := good
			h.Nonce = "made-up"
			h.KeyProof = protocol.HelloProof(key, h.Nonce, &h)
			return &h
		}(),
	} {
		f.coord.ActorSystem().Root.Send(f.coord.NodeGateway(), protocol.Wrap(h))
		refused++
		f.obs.until(t, name+" hello refused", func() bool { return f.obs.refused == refused })
	}
}

// TestReportsWithoutTheSessionChangeNothing: a result that does not carry the session of the
// node's last welcome (forged by someone without the cluster key) is refused.
func TestReportsWithoutTheSessionChangeNothing(t *testing.T) {
	f := newFixture(t, actors.Config{NodeLease: time.Hour})
	n1 := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	a := n1.next(t)
	forged := protocol.Wrap(&protocol.Done{Sender: protocol.Sender{NodeID: "n1", Session: "guess"}, JobID: id.String(), Attempt: 1})
	f.coord.ActorSystem().Root.Send(f.coord.NodeGateway(), forged)
	f.obs.until(t, "the forged report refused", func() bool { return f.obs.refused == 1 })
	if j := f.job(id); j.State != persistence.JobRendering {
		t.Fatalf("a forged report moved the job to %s", j.State)
	}
	a.reply(&protocol.Done{JobID: id.String(), Attempt: 1})
	f.obs.reached(t, id, persistence.JobFinished)
}

// TestAttemptsOutliveACoordinatorRestart: after a restart, a node that still holds its attempt
// keeps it (its result is taken under the same attempt); an attempt no node reclaims within a
// lease is queued again.
func TestAttemptsOutliveACoordinatorRestart(t *testing.T) {
	f := newFixture(t, actors.Config{AdoptAfterRestart: true, HeartbeatInterval: time.Second, NodeLease: 5 * time.Second})
	n1 := f.attachTestNode("n1", 2)
	f.queue(f.team, 0, 2)
	first, second := n1.next(t), n1.next(t)
	f.restart()

	// The node comes back holding only the first attempt.
	n1 = f.attachTestNode("n1", 2, func(h *protocol.Hello) {
		h.Running = []protocol.AttemptStatus{{JobID: first.msg.JobID, Attempt: 1, Percent: 40}}
	})
	if n1.welcomeSeq != 0 {
		t.Fatalf("the restarted coordinator's welcome counts %d assignments", n1.welcomeSeq)
	}
	n1.send(&protocol.Done{JobID: first.msg.JobID, Attempt: 1})
	adopted := ulid.MustParse(first.msg.JobID)
	f.obs.reached(t, adopted, persistence.JobFinished)
	if j := f.job(adopted); j.Attempts != 1 {
		t.Fatalf("the adopted job ended at attempt %d", j.Attempts)
	}

	// The node keeps heartbeating; a lease and a beat after the restart, the attempt nobody
	// reclaimed is given up.
	for range 6 {
		f.clock.Advance(time.Second)
		n1.heartbeat(0)
	}
	orphan := ulid.MustParse(second.msg.JobID)
	again := n1.next(t)
	if again.msg.JobID != orphan.String() || again.msg.Attempt != 2 {
		t.Fatalf("after the lease: %s attempt %d", again.msg.JobID, again.msg.Attempt)
	}
}

// TestReportsOfAnotherNodesAttemptAreRefused: a second welcomed node, with its own session,
// reports the attempt rendering on the first (progress with a log line, a failure, a result):
// each is refused and counted, the job's record and log are untouched, and the first node's
// result finishes it.
func TestReportsOfAnotherNodesAttemptAreRefused(t *testing.T) {
	f := newFixture(t, actors.Config{NodeLease: time.Hour})
	n1 := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	a := n1.next(t)
	n2 := f.attachTestNode("n2", 1)
	before := f.obs.refusals()
	n2.send(&protocol.Progress{JobID: id.String(), Attempt: a.msg.Attempt, Percent: 66, Log: []string{"forged line"}})
	n2.send(&protocol.Failed{JobID: id.String(), Attempt: a.msg.Attempt, Error: "forged failure"})
	n2.send(&protocol.Done{JobID: id.String(), Attempt: a.msg.Attempt, Duration: time.Second})
	f.obs.until(t, "three refusals", func() bool { return f.obs.refused == before+3 })
	// Acknowledged all the same, so an honest node that lost track stops resending.
	for range 2 {
		select {
		case ack := <-n2.acks:
			if ack.JobID != id.String() {
				t.Fatalf("ack %+v", ack)
			}
		case <-time.After(wait):
			t.Fatal("the refused results were not acknowledged")
		}
	}
	j := f.job(id)
	if j.State != persistence.JobRendering || j.Progress != 0 || j.Node != "n1" || len(j.Failures) != 0 {
		t.Fatalf("after the other node's reports: %s %v%% on %s, failures %+v", j.State, j.Progress, j.Node, j.Failures)
	}
	if log := f.store.JobLog(j, f.clock.Now()); strings.Contains(log, "forged") {
		t.Fatalf("the job's log took the other node's words:\n%s", log)
	}
	a.reply(&protocol.Done{JobID: id.String(), Attempt: a.msg.Attempt, Duration: time.Second})
	f.obs.reached(t, id, persistence.JobFinished)
}
