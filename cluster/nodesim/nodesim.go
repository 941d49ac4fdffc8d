// Package nodesim simulates render nodes for benchmarks: many nodes in one process, each with
// its own actor, speaking the real protocol over a real Proto.Actor remote connection to the
// coordinator: a challenged hello proving the cluster key, a welcome checked for the key's proof,
// work taken only under the welcome's session, heartbeats listing what each node holds, results
// resent until acknowledged, and a hello again when the coordinator no longer knows a node. Their
// renders only wait; they fetch and upload nothing. The conformance suite in actors runs the same
// scenarios on it as on the real agent, so the two cannot drift.
package nodesim

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// Config describes the simulated nodes.
type Config struct {
	// Prefix names the nodes: Prefix-0, Prefix-1, ...
	Prefix       string
	Nodes        int
	SlotsPerNode int
	Engines      []string
	// Render is how long each render takes, and PerFrame how much longer for each frame of a
	// chunk of a split job (Task.Chunk with Settings.Frames).
	Render   time.Duration
	PerFrame time.Duration
	// Key is the cluster key the coordinator asks proof of (empty when it asks none).
	Key []byte
	// Clock times renders and heartbeats [the wall clock].
	Clock clock.Clock
	// OnAssign, when set, is called with each assignment as it arrives; OnDone with each
	// render's end, as its result is sent; OnAcknowledged with each result the coordinator
	// acknowledged.
	OnAssign       func(jobID string, attempt int, at time.Time)
	OnDone         func(jobID string, at time.Time)
	OnAcknowledged func(jobID string, attempt int)
}

// Simulator runs the simulated nodes.
type Simulator struct {
	cfg     Config
	system  *actor.ActorSystem
	gateway *actor.PID
	nodes   []*simNode
	stop    chan struct{}
	done    sync.WaitGroup

	Assigned atomic.Int64
	Finished atomic.Int64
	// Rehellos counts heartbeats the coordinator did not recognise (it lost the node).
	Rehellos atomic.Int64
}

type simNode struct {
	id    string
	pid   *actor.PID
	hello protocol.Hello
	// welcomed is signalled at each welcome.
	welcomed chan struct{}

	mu       sync.Mutex
	nonce    string
	session  string
	interval time.Duration
	seq      uint64
	running  map[string]int            // job id -> attempt
	results  map[string]*protocol.Done // job id + attempt -> result not yet acknowledged
}

// Start says hello for every node, as the real agent does, waits for every welcome, then
// heartbeats each node once per interval the coordinator asks for, spread over the interval.
func Start(system *actor.ActorSystem, gateway *actor.PID, cfg Config) (*Simulator, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	s := &Simulator{cfg: cfg, system: system, gateway: gateway, stop: make(chan struct{})}
	for i := range cfg.Nodes {
		n := &simNode{id: fmt.Sprintf("%s-%d", cfg.Prefix, i), running: make(map[string]int),
			results: make(map[string]*protocol.Done), welcomed: make(chan struct{}, 1)}
		n.pid = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) { s.receive(n, ctx) }))
		n.hello = protocol.Hello{NodeID: n.id, AgentAddress: n.pid.Address, AgentID: n.pid.Id, Incarnation: n.id + "-1",
			Engines: cfg.Engines, Slots: cfg.SlotsPerNode, Version: "nodesim"}
		s.nodes = append(s.nodes, n)
	}
	deadline := time.After(2 * time.Minute)
	for _, n := range s.nodes {
		s.sayHello(n)
	}
	// As the agent does, a node whose hello went unanswered says it again (on the wall clock:
	// the welcome is a matter of the network, not of simulated time).
	again := time.NewTicker(5 * time.Second)
	defer again.Stop()
	var interval time.Duration
	for i := 0; i < len(s.nodes); {
		n := s.nodes[i]
		select {
		case <-n.welcomed:
			n.mu.Lock()
			interval = n.interval
			n.mu.Unlock()
			i++
		case <-again.C:
			for _, late := range s.nodes[i:] {
				if !late.isWelcomed() {
					s.sayHello(late)
				}
			}
		case <-deadline:
			return nil, errors.New(n.id + " was not welcomed")
		}
	}
	s.done.Add(1)
	go s.heartbeats(interval)
	return s, nil
}

func (n *simNode) isWelcomed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.session != ""
}

// sayHello asks for a challenge (the node's hello without a nonce), answered to its actor.
func (s *Simulator) sayHello(n *simNode) {
	n.mu.Lock()
	h := n.hello
	h.Running = n.heldLocked()
	n.nonce, n.session = "", ""
	n.mu.Unlock()
	s.system.Root.RequestWithCustomSender(s.gateway, protocol.Wrap(&h), n.pid)
}

// receive is a node's actor: every message of the coordinator comes here, in order.
func (s *Simulator) receive(n *simNode, ctx actor.Context) {
	env, ok := ctx.Message().(*protocol.Envelope)
	if !ok {
		return
	}
	msg, err := protocol.Open(env)
	if err != nil {
		return
	}
	switch m := msg.(type) {
	case *protocol.Challenge:
		n.mu.Lock()
		h := n.hello
		h.Running = n.heldLocked()
		h.Nonce = m.Nonce
		h.KeyProof = protocol.HelloProof(s.cfg.Key, m.Nonce, &h)
		n.nonce = m.Nonce
		n.mu.Unlock()
		ctx.Request(s.gateway, protocol.Wrap(&h))
	case *protocol.Welcome:
		n.mu.Lock()
		ok := m.Accepted && m.Nonce != "" && m.Nonce == n.nonce && n.session == "" && protocol.CheckWelcomeProof(s.cfg.Key, n.id, m)
		if ok {
			n.session, n.interval, n.seq, n.nonce = m.Session, m.HeartbeatInterval, m.Seq, ""
		}
		n.mu.Unlock()
		if ok {
			select {
			case n.welcomed <- struct{}{}:
			default:
			}
		}
	case *protocol.Assign:
		s.assigned(n, m)
	case *protocol.HeartbeatAck:
		if !m.Known {
			s.Rehellos.Add(1)
			s.sayHello(n)
		}
	case *protocol.FinalAck:
		n.mu.Lock()
		key := resultKey(m.JobID, m.Attempt)
		_, held := n.results[key]
		taken := held && m.Session == n.session
		if taken {
			delete(n.results, key)
		}
		n.mu.Unlock()
		if taken {
			if s.cfg.OnAcknowledged != nil {
				s.cfg.OnAcknowledged(m.JobID, m.Attempt)
			}
		}
	}
}

func resultKey(jobID string, attempt int) string { return fmt.Sprintf("%s.%d", jobID, attempt) }

// heldLocked lists what the node renders (at half way) and the results it holds.
func (n *simNode) heldLocked() []protocol.AttemptStatus {
	var out []protocol.AttemptStatus
	for job, attempt := range n.running {
		out = append(out, protocol.AttemptStatus{JobID: job, Attempt: attempt, Percent: 50})
	}
	for _, r := range n.results {
		out = append(out, protocol.AttemptStatus{JobID: r.JobID, Attempt: r.Attempt, Percent: 100})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].JobID < out[k].JobID })
	return out
}

func (s *Simulator) assigned(n *simNode, a *protocol.Assign) {
	n.mu.Lock()
	if n.session == "" || a.Session != n.session {
		n.mu.Unlock()
		return
	}
	n.seq = max(n.seq, a.Seq)
	n.running[a.JobID] = a.Attempt
	n.mu.Unlock()
	s.Assigned.Add(1)
	// The render's end is timed before anyone hears of its start, so a test that moves the clock
	// once told of the assignment moves it past the end.
	defer func() {
		if s.cfg.OnAssign != nil {
			s.cfg.OnAssign(a.JobID, a.Attempt, s.cfg.Clock.Now())
		}
	}()
	took := s.cfg.Render
	if f := a.Task.Settings.Frames; a.Task.Chunk && f != nil {
		took += time.Duration(f.End-f.Start+1) * s.cfg.PerFrame
	}
	s.cfg.Clock.AfterFunc(took, func() {
		n.mu.Lock()
		delete(n.running, a.JobID)
		done := &protocol.Done{Sender: protocol.Sender{NodeID: n.id, Session: n.session}, JobID: a.JobID, Attempt: a.Attempt, Duration: took}
		n.results[resultKey(a.JobID, a.Attempt)] = done
		env := protocol.Wrap(done)
		n.mu.Unlock()
		s.system.Root.RequestWithCustomSender(s.gateway, env, n.pid)
		s.Finished.Add(1)
		if s.cfg.OnDone != nil {
			s.cfg.OnDone(a.JobID, s.cfg.Clock.Now())
		}
	})
}

// Agent is the actor of the ith node, where the coordinator's messages to it go.
func (s *Simulator) Agent(i int) *actor.PID { return s.nodes[i].pid }

// Beat sends one node's heartbeat now, with its unacknowledged results again (what the
// heartbeat loop does for each node once per interval).
func (s *Simulator) Beat(i int) {
	n := s.nodes[i]
	n.mu.Lock()
	if n.session == "" {
		n.mu.Unlock()
		return
	}
	from := protocol.Sender{NodeID: n.id, Session: n.session}
	send := []*protocol.Envelope{protocol.Wrap(&protocol.Heartbeat{Sender: from, Incarnation: n.hello.Incarnation, Seq: n.seq, Running: n.heldLocked()})}
	for _, r := range n.results {
		r.Sender = from
		send = append(send, protocol.Wrap(r))
	}
	n.mu.Unlock()
	for _, env := range send {
		s.system.Root.RequestWithCustomSender(s.gateway, env, n.pid)
	}
}

// heartbeats beats every node once per interval, a slice of them every 10 ms.
func (s *Simulator) heartbeats(interval time.Duration) {
	defer s.done.Done()
	const tick = 10 * time.Millisecond
	perTick := max(1, len(s.nodes)*int(tick)/int(interval))
	next := 0
	for {
		wake := make(chan struct{})
		timer := s.cfg.Clock.AfterFunc(tick, func() { close(wake) })
		select {
		case <-s.stop:
			timer.Stop()
			return
		case <-wake:
		}
		for range perTick {
			s.Beat(next)
			next = (next + 1) % len(s.nodes)
		}
	}
}

// Stop ends the heartbeats; the nodes' leases then expire on the coordinator.
func (s *Simulator) Stop() {
	close(s.stop)
	s.done.Wait()
}
