// Package nodesim simulates render nodes for benchmarks: many nodes in one process, each with
// its own actor, speaking the real protocol (the same envelope, hello, heartbeats with the
// attempts they hold, results acknowledged) over a real Proto.Actor remote connection to the
// coordinator. Their renders only wait; they fetch and upload nothing.
package nodesim

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// Config describes the simulated nodes.
type Config struct {
	// Prefix names the nodes: Prefix-0, Prefix-1, ...
	Prefix       string
	Nodes        int
	SlotsPerNode int
	Engines      []string
	// Render is how long each render takes.
	Render time.Duration
	// Key is the cluster key the coordinator asks proof of (empty when it asks none).
	Key []byte
	// OnAssign, when set, is called with each assignment as it arrives; OnDone with each
	// render's end, as its result is sent.
	OnAssign func(jobID string, attempt int, at time.Time)
	OnDone   func(jobID string, at time.Time)
}

// Simulator runs the simulated nodes.
type Simulator struct {
	cfg     Config
	system  *actor.ActorSystem
	gateway *actor.PID
	sink    *actor.PID
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
	hello *protocol.Hello
	// welcomed is closed once the node's welcome arrived.
	welcomed chan struct{}

	mu       sync.Mutex
	nonce    string
	session  string
	interval time.Duration
	seq      uint64
	running  map[string]int // job id -> attempt
}

// Start says hello for every node, as the real agent does (a challenge, then a hello proving the
// cluster key, both answered to the node's actor), waits for every welcome, then heartbeats each
// node once per interval the coordinator asks for, spread evenly over the interval.
func Start(system *actor.ActorSystem, gateway *actor.PID, cfg Config) (*Simulator, error) {
	s := &Simulator{cfg: cfg, system: system, gateway: gateway, stop: make(chan struct{})}
	s.sink = system.Root.Spawn(actor.PropsFromFunc(s.receiveAnswer))
	for i := range cfg.Nodes {
		n := &simNode{id: fmt.Sprintf("%s-%d", cfg.Prefix, i), running: make(map[string]int), welcomed: make(chan struct{})}
		n.pid = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) { s.receive(n, ctx) }))
		n.hello = &protocol.Hello{NodeID: n.id, AgentAddress: n.pid.Address, AgentID: n.pid.Id, Incarnation: n.id + "-1",
			Engines: cfg.Engines, Slots: cfg.SlotsPerNode, Version: "nodesim"}
		s.nodes = append(s.nodes, n)
	}
	deadline := time.After(2 * time.Minute)
	for _, n := range s.nodes {
		system.Root.RequestWithCustomSender(gateway, protocol.Wrap(n.hello), n.pid)
	}
	var interval time.Duration
	for _, n := range s.nodes {
		select {
		case <-n.welcomed:
		case <-deadline:
			return nil, errors.New(n.id + " was not welcomed")
		}
		n.mu.Lock()
		interval = n.interval
		n.mu.Unlock()
	}
	s.done.Add(1)
	go s.heartbeats(interval)
	return s, nil
}

// receive is a node's actor: its challenge, its welcome and its assignments.
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
		h := *n.hello
		h.Nonce = m.Nonce
		h.KeyProof = protocol.HelloProof(s.cfg.Key, m.Nonce, &h)
		n.mu.Lock()
		n.nonce = m.Nonce
		n.mu.Unlock()
		ctx.Request(s.gateway, protocol.Wrap(&h))
	case *protocol.Welcome:
		n.mu.Lock()
		defer n.mu.Unlock()
		if m.Accepted && m.Nonce == n.nonce && n.session == "" && protocol.CheckWelcomeProof(s.cfg.Key, n.id, m) {
			n.session, n.interval = m.Session, m.HeartbeatInterval
			close(n.welcomed)
		}
	case *protocol.Assign:
		s.assigned(n, m)
	}
}

func (s *Simulator) assigned(n *simNode, a *protocol.Assign) {
	n.mu.Lock()
	if a.Session == "" || a.Session != n.session {
		n.mu.Unlock()
		return
	}
	n.seq = max(n.seq, a.Seq)
	n.running[a.JobID] = a.Attempt
	session := n.session
	n.mu.Unlock()
	now := time.Now()
	s.Assigned.Add(1)
	if s.cfg.OnAssign != nil {
		s.cfg.OnAssign(a.JobID, a.Attempt, now)
	}
	time.AfterFunc(s.cfg.Render, func() {
		n.mu.Lock()
		delete(n.running, a.JobID)
		n.mu.Unlock()
		done := &protocol.Done{Sender: protocol.Sender{NodeID: n.id, Session: session}, JobID: a.JobID, Attempt: a.Attempt, Duration: s.cfg.Render}
		s.system.Root.RequestWithCustomSender(s.gateway, protocol.Wrap(done), s.sink)
		s.Finished.Add(1)
		if s.cfg.OnDone != nil {
			s.cfg.OnDone(a.JobID, time.Now())
		}
	})
}

// heartbeats sends every node's heartbeat once per interval, in slices every 10 ms.
func (s *Simulator) heartbeats(interval time.Duration) {
	defer s.done.Done()
	const tick = 10 * time.Millisecond
	perTick := max(1, len(s.nodes)*int(tick)/int(interval))
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	next := 0
	for {
		select {
		case <-s.stop:
			return
		case <-ticker.C:
		}
		for range perTick {
			n := s.nodes[next]
			next = (next + 1) % len(s.nodes)
			n.mu.Lock()
			hb := &protocol.Heartbeat{Sender: protocol.Sender{NodeID: n.id, Session: n.session}, Incarnation: n.hello.Incarnation, Seq: n.seq}
			for job, attempt := range n.running {
				hb.Running = append(hb.Running, protocol.AttemptStatus{JobID: job, Attempt: attempt, Percent: 50})
			}
			n.mu.Unlock()
			s.system.Root.RequestWithCustomSender(s.gateway, protocol.Wrap(hb), s.sink)
		}
	}
}

// receiveAnswer takes the coordinator's answers to heartbeats and results.
func (s *Simulator) receiveAnswer(ctx actor.Context) {
	env, ok := ctx.Message().(*protocol.Envelope)
	if !ok {
		return
	}
	if msg, err := protocol.Open(env); err == nil {
		if ack, ok := msg.(*protocol.HeartbeatAck); ok && !ack.Known {
			s.Rehellos.Add(1)
		}
	}
}

// Stop ends the heartbeats; the nodes' leases then expire on the coordinator.
func (s *Simulator) Stop() {
	close(s.stop)
	s.done.Wait()
}
