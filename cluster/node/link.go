package node

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// Connect points the node at the coordinator's gateway actor (at start, and whenever cluster
// membership shows the coordinator at a new address); Run then says Hello.
func (a *Agent) Connect(gateway *actor.PID) {
	a.mu.Lock()
	changed := a.coordinator == nil || !a.coordinator.Equal(gateway)
	a.coordinator = gateway
	if changed {
		a.welcomed, a.helloAt, a.nonce = false, time.Time{}, ""
	}
	a.mu.Unlock()
	a.nudge()
}

// Reconnect makes the node say Hello again (the coordinator restarted at the same address).
func (a *Agent) Reconnect() {
	a.mu.Lock()
	a.welcomed, a.helloAt, a.nonce = false, time.Time{}, ""
	a.mu.Unlock()
	a.nudge()
}

func (a *Agent) nudge() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// holdsNothing reports whether the node holds no attempt: none rendering, no result unacknowledged.
func (a *Agent) holdsNothing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.running) == 0 && len(a.finals) == 0
}

func (a *Agent) signalIdle() {
	if a.holdsNothing() {
		select {
		case a.idle <- struct{}{}:
		default:
		}
	}
}

// finish records an attempt's result and sends it; Run resends it until the coordinator acks.
func (a *Agent) finish(k attemptKey, final any) {
	a.mu.Lock()
	a.finals[k] = final
	a.mu.Unlock()
	a.nudge()
}

// Run keeps the node's link to the coordinator: Hello until welcomed, then a heartbeat every
// interval the coordinator asked for, and every unacknowledged result sent again. It returns
// when ctx ends.
func (a *Agent) Run(ctx context.Context) {
	for {
		a.tick()
		a.mu.Lock()
		interval := a.interval
		a.mu.Unlock()
		timer := a.clock.AfterFunc(interval, a.nudge)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-a.wake:
		}
		timer.Stop()
	}
}

// challenged answers the coordinator's challenge with a hello proving the cluster key. A
// challenge the node did not ask for (it is welcomed, or says no hello) is ignored.
func (a *Agent) challenged(c *protocol.Challenge, from sender) {
	a.mu.Lock()
	coordinator, system, self := a.coordinator, a.system, a.self
	asked := !a.welcomed && !a.helloAt.IsZero() && a.nonce == "" && c.Nonce != "" && coordinator != nil && from.mayBeCoordinator()
	if asked {
		a.nonce, a.helloAt = c.Nonce, a.clock.Now()
	}
	a.mu.Unlock()
	if !asked {
		a.log.Debug("ignored a challenge this node did not ask for", "from", from.describe())
		return
	}
	h := a.Hello()
	h.Nonce = c.Nonce
	h.KeyProof = protocol.HelloProof(a.cfg.ClusterKey, c.Nonce, h)
	system.Root.RequestWithCustomSender(coordinator, protocol.Wrap(h), self)
}

// mayBeCoordinator reports whether a sender may be the coordinator: this process, a peer whose
// certificate names the coordinator, or, without TLS, anyone (the key proofs then tell).
func (s sender) mayBeCoordinator() bool {
	return !s.remote || !s.peer.Verified || s.peer.Identity.Role == certs.RoleCoordinator
}

// welcome takes the coordinator's answer to the hello the node sent last: it must echo that
// hello's challenge and prove the coordinator holds the cluster key. Run then sends heartbeats
// and results; the node takes work only from this welcome's sender, under its session.
func (a *Agent) welcome(w *protocol.Welcome, from sender) {
	a.mu.Lock()
	current := !a.welcomed && a.nonce != "" && w.Nonce == a.nonce && from.mayBeCoordinator()
	a.mu.Unlock()
	if current && !w.Accepted {
		// A refusal changes nothing, so it needs no proof (a node with the wrong key could not
		// check one).
		a.log.Error("the coordinator refused this node", "reason", w.Reason)
		return
	}
	if !current || !protocol.CheckWelcomeProof(a.cfg.ClusterKey, a.cfg.NodeID, w) {
		a.log.Warn("refused a welcome that answers no hello of this node", "from", from.describe())
		return
	}
	a.mu.Lock()
	a.welcomed, a.session, a.welcomedBy, a.internalURL = true, w.Session, from, w.InternalURL
	a.nonce = ""
	a.interval = w.HeartbeatInterval
	// The count goes on from the welcome's: assignments sent before it were handled before it.
	// A coordinator that restarted counts from 0, so the node's count from before is dropped.
	a.seq = w.Seq
	coordinator := a.coordinator
	a.mu.Unlock()
	a.log.Info("joined the coordinator", "coordinator", coordinator.GetAddress(), "heartbeat", w.HeartbeatInterval, "lease", w.Lease)
	a.nudge()
}

// sayHello asks for a challenge, unless a hello sent less than patience ago may still be
// answered: one welcome is enough. Challenges and welcomes come to the agent's actor, not to a
// future: sent to the same actor as the assignments, they are handled in the order the
// coordinator sent them.
func (a *Agent) sayHello(system *actor.ActorSystem, coordinator, self *actor.PID, patience time.Duration) {
	now := a.clock.Now()
	a.mu.Lock()
	waiting := !a.helloAt.IsZero() && now.Sub(a.helloAt) < patience
	if !waiting {
		a.helloAt, a.nonce = now, ""
	}
	a.mu.Unlock()
	if !waiting {
		system.Root.RequestWithCustomSender(coordinator, protocol.Wrap(a.Hello()), self)
	}
}

// tick does one round of the link's work.
func (a *Agent) tick() {
	a.mu.Lock()
	coordinator, system, self, welcomed, interval := a.coordinator, a.system, a.self, a.welcomed, a.interval
	a.mu.Unlock()
	if coordinator == nil || system == nil {
		return
	}
	if !welcomed {
		a.sayHello(system, coordinator, self, max(interval, time.Second))
		return
	}
	ask := func(msg any) (any, error) { return a.ask(system, coordinator, msg, max(interval, time.Second)) }
	a.mu.Lock()
	hb := &protocol.Heartbeat{Incarnation: a.incarnation, Seq: a.seq, Running: a.heldLocked()}
	a.stampLocked(hb)
	a.mu.Unlock()
	res, err := ask(hb)
	if err != nil {
		a.log.Debug("heartbeat unanswered", "err", err)
		return
	}
	if ack, ok := res.(*protocol.HeartbeatAck); ok {
		if !ack.Known {
			a.Reconnect()
			return
		}
		for i := range ack.Abandon {
			a.abandon(&ack.Abandon[i])
		}
	}
	a.sendFinals(ask)
}

// ask sends a message to the coordinator and returns its answer.
func (a *Agent) ask(system *actor.ActorSystem, coordinator *actor.PID, msg any, timeout time.Duration) (any, error) {
	res, err := system.Root.RequestFuture(coordinator, protocol.Wrap(msg), timeout).Result()
	if err != nil {
		return nil, err
	}
	env, ok := res.(*protocol.Envelope)
	if !ok {
		return nil, errors.New("the coordinator answered with something that is not an envelope")
	}
	return protocol.Open(env)
}

// sendFinals sends every unacknowledged result; an acknowledged one is forgotten with its marker.
func (a *Agent) sendFinals(ask func(any) (any, error)) {
	a.mu.Lock()
	pending := make(map[attemptKey]any, len(a.finals))
	for k, f := range a.finals {
		a.stampLocked(f)
		pending[k] = f
	}
	a.mu.Unlock()
	for k, final := range pending {
		res, err := ask(final)
		if err != nil {
			return // the coordinator is unreachable: the next tick tries again
		}
		if _, ok := res.(*protocol.FinalAck); !ok {
			continue
		}
		a.mu.Lock()
		delete(a.finals, k)
		a.mu.Unlock()
		os.Remove(a.markerPath(k))
	}
	a.signalIdle()
}

// startDrain stops the node taking new work and tells the coordinator so.
func (a *Agent) startDrain() {
	a.mu.Lock()
	already := a.draining
	a.draining = true
	a.mu.Unlock()
	if !already {
		a.log.Info("draining: finishing current renders, taking no new ones")
		a.report(&protocol.Drain{})
	}
}

// Drain finishes the node's renders and delivers their results, taking no new work, then says
// Bye. It returns early, with ctx's error, when ctx ends first.
func (a *Agent) Drain(ctx context.Context) error {
	a.startDrain()
	a.signalIdle()
	for {
		if a.holdsNothing() {
			// Said and answered before the process goes, so the coordinator need not wait for
			// the lease to learn of it.
			a.mu.Lock()
			coordinator, system := a.coordinator, a.system
			bye := &protocol.Bye{}
			a.stampLocked(bye)
			a.mu.Unlock()
			if coordinator != nil {
				if _, err := a.ask(system, coordinator, bye, 5*time.Second); err != nil {
					a.log.Warn("the coordinator did not answer the goodbye; it will see the node gone when its lease ends", "err", err)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.idle:
		}
	}
}
