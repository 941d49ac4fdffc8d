package node

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// Connect points the node at the coordinator's gateway actor (at start, and whenever cluster
// membership shows the coordinator at a new address); Run then says Hello.
func (a *Agent) Connect(gateway *actor.PID) {
	a.mu.Lock()
	if a.coordinator == nil || !a.coordinator.Equal(gateway) {
		a.book.reset()
	}
	a.coordinator = gateway
	a.linkChangedLocked()
	a.mu.Unlock()
	a.nudge()
}

// linkChangedLocked tells the questions waiting on the link that it changed. a.mu is held.
func (a *Agent) linkChangedLocked() {
	close(a.linkChanged)
	a.linkChanged = make(chan struct{})
}

// Reconnect makes the node say Hello again (the coordinator restarted at the same address).
func (a *Agent) Reconnect() {
	a.mu.Lock()
	a.book.reset()
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
	return len(a.running) == 0 && len(a.book.finals) == 0
}

func (a *Agent) signalIdle() {
	if a.holdsNothing() {
		select {
		case a.idle <- struct{}{}:
		default:
		}
	}
}

// finish records an attempt's result and sends it; Run resends it until the coordinator
// acknowledges it, once the job's outcome is durable.
func (a *Agent) finish(k attemptKey, final any) {
	a.mu.Lock()
	a.book.finished(k, final)
	a.mu.Unlock()
	a.nudge()
}

// Run keeps the node's link to the coordinator: hello until welcomed, then a heartbeat every
// interval the coordinator asked for, and every unacknowledged result sent again. Every answer
// comes to the agent's actor, in order with the coordinator's other messages. Run returns when
// ctx ends.
func (a *Agent) Run(ctx context.Context) {
	for {
		a.mu.Lock()
		coordinator, system, self := a.coordinator, a.system, a.self
		var send []*protocol.Envelope
		if coordinator != nil && system != nil {
			for _, msg := range a.book.tick(a.clock.Now(), a.runningLocked()) {
				send = append(send, protocol.Wrap(msg)) // under the lock: results are the book's
			}
		}
		interval := a.book.interval
		a.mu.Unlock()
		for _, env := range send {
			system.Root.RequestWithCustomSender(coordinator, env, self)
		}
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

// challenged answers the coordinator's challenge with a hello proving the cluster key.
func (a *Agent) challenged(c *protocol.Challenge, from sender) {
	a.mu.Lock()
	h := a.book.onChallenge(c, from, a.clock.Now(), a.runningLocked())
	coordinator, system, self := a.coordinator, a.system, a.self
	a.mu.Unlock()
	if h == nil {
		a.log.Debug("ignored a challenge this node did not ask for", "from", from.describe())
		return
	}
	system.Root.RequestWithCustomSender(coordinator, protocol.Wrap(h), self)
}

// welcome takes the coordinator's answer to the node's hello; Run then sends heartbeats and
// results, and the node takes work only from this welcome's sender, under its session.
func (a *Agent) welcome(w *protocol.Welcome, from sender) {
	a.mu.Lock()
	outcome := a.book.onWelcome(w, from)
	coordinator := a.coordinator
	if outcome == welcomeAccepted {
		a.linkChangedLocked()
	}
	a.mu.Unlock()
	switch outcome {
	case welcomeRefused:
		a.log.Error("the coordinator refused this node", "reason", w.Reason)
	case welcomeIgnored:
		a.refused("refused a welcome that answers no hello of this node", from)
	case welcomeAccepted:
		where := coordinator.GetAddress()
		if where == a.system.ProcessRegistry.Address { // the node embedded in the coordinator's process
			where = "this process"
		}
		a.log.Info("joined the coordinator", "coordinator", where, "heartbeat", w.HeartbeatInterval, "lease", w.Lease)
		a.nudge()
	}
}

// heartbeatAnswered takes the coordinator's answer to a heartbeat.
func (a *Agent) heartbeatAnswered(ack *protocol.HeartbeatAck, from sender) {
	a.mu.Lock()
	rehello, abandon := a.book.onHeartbeatAck(ack, from)
	a.mu.Unlock()
	for i := range abandon {
		a.abandon(&abandon[i])
	}
	if rehello {
		a.nudge()
	}
}

// acknowledged forgets a result the coordinator made durable, with its marker.
func (a *Agent) acknowledged(ack *protocol.FinalAck, from sender) {
	a.mu.Lock()
	k, ok := a.book.onFinalAck(ack, from)
	a.mu.Unlock()
	if ok {
		os.Remove(a.markerPath(k))
		a.signalIdle()
		if a.cfg.OnAcknowledged != nil {
			a.cfg.OnAcknowledged(k.jobID, k.attempt)
		}
	}
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

// startDrain stops the node taking new work and tells the coordinator so.
func (a *Agent) startDrain() {
	a.mu.Lock()
	already := a.book.draining
	a.book.draining = true
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
			bye := a.book.stamp(&protocol.Bye{})
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
