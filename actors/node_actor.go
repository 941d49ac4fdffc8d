package actors

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
)

// nodeActor stands for one render node inside the coordinator. It holds the node's lease: every
// heartbeat renews it, and when none came for Config.NodeLease (the node died, hung, or is cut
// off) every attempt the node held is lost and its job queued again under a new attempt number.
// Its states are in STATE_MACHINE.md ("Render nodes"); setState is the one place they change.
type nodeActor struct {
	c     *Coordinator
	hello protocol.Hello
	agent *actor.PID
	log   *slog.Logger
	state string
	// why says what put the node in its state (lost, quarantined, drained).
	why string
	// session is the token the node's messages must carry since its last hello.
	session string
	// seq numbers the assignments sent to the node's current incarnation.
	seq           uint64
	running       map[ulid.ULID]*heldAttempt
	lastHeartbeat time.Time
	// failStreak holds the distinct jobs that failed on the node since its last finished
	// render: one broken job failing again is not the node's fault, many different ones are.
	failStreak map[ulid.ULID]bool
	// adminDrain: an operator drained the node; quarantine: why the node was quarantined. Both
	// are recorded in the store and hold until an operator clears the node.
	adminDrain bool
	quarantine string
	tick       interface{ Stop() bool }
}

type heldAttempt struct {
	attempt int
	team    ulid.ULID
	seq     uint64
	percent float64
	// progressAt is when the attempt last moved; a render that stays still past the silence
	// limit is taken back even if the node keeps sending heartbeats.
	progressAt time.Time
}

// Messages to a NodeActor.
type (
	// assign asks the node to render the job (already moved to render:dorender).
	assign struct {
		job      *persistence.Job
		queuedAt time.Time
	}
	// fromNode is a message of the node, with whom to answer and the session it carries.
	fromNode struct {
		msg     any
		sender  *actor.PID
		session string
	}
	// leaseTick makes the actor check its node's lease.
	leaseTick struct{}
	// nodeLeft tells a NodeActor membership saw an incarnation of its node leave or die.
	nodeLeft struct{ incarnation, reason string }
	// nodeCommand is an operator's drain or clear; it answers with the node's NodeInfo.
	nodeCommand struct{ drain bool }
	// forgetNode asks a lost or departed node's actor to clear its hold and stop; it answers
	// true, or ErrNodeActive.
	forgetNode struct{}
)

func newNodeActor(c *Coordinator, hello *protocol.Hello) *nodeActor {
	n := &nodeActor{c: c, hello: *hello, log: c.log.With("node", hello.NodeID), running: map[ulid.ULID]*heldAttempt{},
		failStreak: map[ulid.ULID]bool{}, state: NodeJoined}
	// A quarantine or an operator's drain outlives the node's restarts and the coordinator's.
	c.Store.View(func(tx *persistence.Tx) error {
		if why := tx.Meta(nodeHoldKey(hello.NodeID)); why == drainedByOperator {
			n.adminDrain = true
		} else {
			n.quarantine = why
		}
		return nil
	})
	return n
}

const drainedByOperator = "drained by an operator"

func nodeHoldKey(nodeID string) string { return "node_hold/" + nodeID }

func (n *nodeActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		n.c.Observer.NodeStateChanged(n.hello.NodeID, "", NodeJoined)
		n.scheduleTick(ctx)
	case *actor.Stopping:
		if n.tick != nil {
			n.tick.Stop()
		}
	case *fromNode:
		n.fromNode(ctx, m)
	case *assign:
		n.assign(ctx, m)
	case *leaseTick:
		n.tick = nil
		n.checkLease(ctx)
		// A lost or departed node has no lease to watch until it says hello again.
		if n.state != NodeLost && n.state != NodeLeft {
			n.scheduleTick(ctx)
		}
	case *nodeLeft:
		if n.state != NodeLeft && n.state != NodeLost && m.incarnation == n.hello.Incarnation {
			n.lose(ctx, m.reason)
			n.publish()
		}
	case *nodeCommand:
		n.command(ctx, m)
	case *forgetNode:
		if n.state != NodeLost && n.state != NodeLeft {
			ctx.Respond(fmt.Errorf("%w: %s is %s", ErrNodeActive, n.hello.NodeID, n.state))
			return
		}
		n.hold("")
		n.c.Observer.NodeStateChanged(n.hello.NodeID, n.state, "")
		ctx.Respond(true)
		ctx.Stop(ctx.Self())
	}
}

func (n *nodeActor) scheduleTick(ctx actor.Context) {
	self, system := ctx.Self(), ctx.ActorSystem()
	n.tick = n.c.Clock.AfterFunc(n.c.cfg.HeartbeatInterval, func() { system.Root.Send(self, &leaseTick{}) })
}

func (n *nodeActor) fromNode(ctx actor.Context, m *fromNode) {
	answer := func(msg any) {
		if m.sender != nil {
			ctx.Send(m.sender, protocol.Wrap(msg))
		}
	}
	if _, hello := m.msg.(*protocol.Hello); !hello && m.session != n.session {
		// Not from the node this actor welcomed last: a forgery, or the node from before its
		// last hello. Nothing changes; a heartbeat is told to say hello.
		n.c.Observer.NodeMessageRefused("session")
		n.log.Warn("refused a message without the node's current session", "type", fmt.Sprintf("%T", m.msg))
		if _, ok := m.msg.(*protocol.Heartbeat); ok {
			answer(&protocol.HeartbeatAck{Known: false})
		}
		return
	}
	switch msg := m.msg.(type) {
	case *protocol.Hello:
		answer(n.onHello(ctx, msg))
		// After the welcome, which they follow to the node's actor: they carry its session.
		n.abandonUnknown(ctx, msg.Running)
	case *protocol.Heartbeat:
		answer(n.onHeartbeat(ctx, msg))
	case *protocol.Progress:
		if r := n.running[n.jobID(msg.JobID)]; r != nil && r.attempt == msg.Attempt && msg.Percent != r.percent {
			r.percent, r.progressAt = msg.Percent, n.c.Clock.Now()
		}
		n.c.tellJob(n.jobID(msg.JobID), &renderProgress{attempt: msg.Attempt, percent: msg.Percent})
		return // the node's listing does not show progress: nothing to publish
	case *protocol.Done:
		jobID := n.jobID(msg.JobID)
		n.c.tellJob(jobID, &renderDone{attempt: msg.Attempt, node: n.hello.NodeID, duration: msg.Duration, log: msg.Log})
		if n.release(ctx, jobID, msg.Attempt) {
			clear(n.failStreak)
			n.c.Observer.NodeRender(n.hello.NodeID, true)
		}
		answer(&protocol.FinalAck{JobID: msg.JobID, Attempt: msg.Attempt})
	case *protocol.Failed:
		jobID := n.jobID(msg.JobID)
		n.c.tellJob(jobID, &renderFailed{attempt: msg.Attempt, node: n.hello.NodeID, err: msg.Error,
			retryable: msg.Retryable, log: msg.Log, countless: msg.NotStarted})
		if n.release(ctx, jobID, msg.Attempt) && !msg.NotStarted {
			n.c.Observer.NodeRender(n.hello.NodeID, false)
			n.failStreak[jobID] = true
			if len(n.failStreak) >= n.c.cfg.NodeFailureLimit && n.state == NodeReady {
				n.quarantineNode(ctx, fmt.Sprintf("renders of %d different jobs failed in a row, the last: %s", len(n.failStreak), msg.Error))
			}
		}
		answer(&protocol.FinalAck{JobID: msg.JobID, Attempt: msg.Attempt})
	case *protocol.Drain:
		if n.state == NodeReady || n.state == NodeSuspect {
			n.setState(ctx, NodeDraining, "the node is stopping")
		}
	case *protocol.Bye:
		n.lose(ctx, "the node left the farm")
		n.setState(ctx, NodeLeft, "the node left the farm")
		answer(&protocol.Ack{Kind: "bye"})
	}
	n.publish()
}

// onHello (re)admits the node. A new incarnation has lost what the previous one held; attempts
// the node holds but the coordinator has moved past are abandoned.
func (n *nodeActor) onHello(ctx actor.Context, h *protocol.Hello) *protocol.Welcome {
	if h.Incarnation != n.hello.Incarnation || n.state == NodeLost || n.state == NodeLeft {
		n.loseAttempts(ctx, "the render node restarted", func(id ulid.ULID, r *heldAttempt) bool {
			return !slices.ContainsFunc(h.Running, func(s protocol.AttemptStatus) bool { return s.JobID == id.String() && s.Attempt == r.attempt })
		})
		n.seq = 0
	}
	n.hello = *h
	n.agent = actor.NewPID(h.AgentAddress, h.AgentID)
	if n.tick == nil {
		n.scheduleTick(ctx)
	}
	n.log = n.c.log.With("node", h.NodeID)
	n.lastHeartbeat = n.c.Clock.Now()
	n.adopt(h.Running)
	switch {
	case h.Draining:
		n.setState(ctx, NodeDraining, "the node is stopping")
	case n.adminDrain:
		n.setState(ctx, NodeDraining, drainedByOperator)
	case n.quarantine != "":
		n.setState(ctx, NodeQuarantined, n.quarantine)
	default:
		n.setState(ctx, NodeReady, "")
	}
	n.session = newSession()
	n.log.Info("render node joined", "engines", h.Engines, "slots", h.Slots, "version", h.Version, "state", n.state)
	return &protocol.Welcome{Accepted: true, Session: n.session, Nonce: h.Nonce,
		Proof:       protocol.WelcomeProof(n.c.cfg.ClusterKey, h.Nonce, h.NodeID, n.session),
		InternalURL: n.c.NodeURLs.Base(), HeartbeatInterval: n.c.cfg.HeartbeatInterval, Lease: n.c.cfg.NodeLease, Seq: n.seq}
}

func (n *nodeActor) onHeartbeat(ctx actor.Context, hb *protocol.Heartbeat) *protocol.HeartbeatAck {
	if hb.Incarnation != n.hello.Incarnation || n.state == NodeLost || n.state == NodeLeft || n.state == NodeJoined {
		return &protocol.HeartbeatAck{Known: false}
	}
	now := n.c.Clock.Now()
	n.lastHeartbeat = now
	if n.state == NodeSuspect {
		n.setState(ctx, NodeReady, "")
	}
	for _, s := range hb.Running {
		if r := n.running[n.jobID(s.JobID)]; r != nil && r.attempt == s.Attempt && s.Percent != r.percent {
			r.percent, r.progressAt = s.Percent, now
		}
	}
	// An assignment the node has seen but no longer holds ended without a result reaching us.
	n.loseAttempts(ctx, "the render node no longer holds the attempt", func(id ulid.ULID, r *heldAttempt) bool {
		return r.seq <= hb.Seq && !slices.ContainsFunc(hb.Running, func(s protocol.AttemptStatus) bool { return s.JobID == id.String() && s.Attempt == r.attempt })
	})
	return &protocol.HeartbeatAck{Known: true, Abandon: n.abandonList(hb.Running)}
}

// adopt takes back the attempts this node still holds that were rendering on it when the
// coordinator restarted: they go on under their attempt numbers.
func (n *nodeActor) adopt(held []protocol.AttemptStatus) {
	now := n.c.Clock.Now()
	for _, s := range held {
		jobID := n.jobID(s.JobID)
		if _, known := n.running[jobID]; known {
			continue
		}
		if a, ok := n.c.adoptions.claim(jobID, s.Attempt, n.hello.NodeID); ok {
			n.running[jobID] = &heldAttempt{attempt: a.attempt, team: a.team, percent: s.Percent, progressAt: now}
			n.log.Info("adopted an attempt that outlived the coordinator's restart", "job", s.JobID, "attempt", s.Attempt)
		}
	}
}

// abandonList names the attempts the node holds that are not (or no longer) its assignments.
func (n *nodeActor) abandonList(held []protocol.AttemptStatus) []protocol.Abandon {
	var out []protocol.Abandon
	for _, s := range held {
		if r := n.running[n.jobID(s.JobID)]; r == nil || r.attempt != s.Attempt {
			if s.Percent >= 100 {
				continue // a result on its way: it is acked (and fenced) when it arrives
			}
			out = append(out, protocol.Abandon{Session: n.session, JobID: s.JobID, Attempt: s.Attempt, Reason: "the attempt is no longer the job's current one"})
		}
	}
	return out
}

func (n *nodeActor) abandonUnknown(ctx actor.Context, held []protocol.AttemptStatus) {
	for _, a := range n.abandonList(held) {
		ctx.Send(n.agent, protocol.Wrap(&a))
	}
}

func (n *nodeActor) jobID(s string) ulid.ULID { return parseJobID(s) }

// newSession makes an unguessable session token.
func newSession() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (n *nodeActor) assign(ctx actor.Context, m *assign) {
	job := m.job
	if n.state != NodeReady {
		// The offer raced the node's loss or drain: the attempt never started.
		n.c.tellJob(job.ID, &renderFailed{attempt: job.Attempts, node: n.hello.NodeID, err: "the render node is " + n.state,
			retryable: true, countless: true})
		ctx.Send(n.c.scheduler, &slotFreed{nodeID: n.hello.NodeID, jobID: job.ID})
		return
	}
	task, err := n.c.buildTask(job)
	if err != nil {
		n.c.tellJob(job.ID, &renderFailed{attempt: job.Attempts, node: n.hello.NodeID, err: err.Error()})
		ctx.Send(n.c.scheduler, &slotFreed{nodeID: n.hello.NodeID, jobID: job.ID})
		return
	}
	n.seq++
	now := n.c.Clock.Now()
	n.running[job.ID] = &heldAttempt{attempt: job.Attempts, team: job.TeamID, seq: n.seq, progressAt: now}
	ctx.Send(n.agent, protocol.Wrap(&protocol.Assign{Session: n.session, Seq: n.seq, JobID: job.ID.String(), Attempt: job.Attempts, Task: task}))
	n.c.Observer.Assigned(now.Sub(m.queuedAt))
	n.publish()
}

// release frees the slot of an attempt that ended; a report for an attempt the node no longer
// holds frees nothing and returns false.
func (n *nodeActor) release(ctx actor.Context, jobID ulid.ULID, attempt int) bool {
	r, ok := n.running[jobID]
	if !ok || r.attempt != attempt {
		return false
	}
	delete(n.running, jobID)
	ctx.Send(n.c.scheduler, &slotFreed{nodeID: n.hello.NodeID, jobID: jobID})
	return true
}

// loseAttempts fails the held attempts lost says are lost; their jobs are queued again.
func (n *nodeActor) loseAttempts(ctx actor.Context, reason string, lost func(ulid.ULID, *heldAttempt) bool) {
	for jobID, r := range n.running {
		if lost(jobID, r) {
			n.log.Warn("attempt lost", "job", jobID.String(), "attempt", r.attempt, "reason", reason)
			n.c.tellJob(jobID, &renderFailed{attempt: r.attempt, node: n.hello.NodeID, err: reason, retryable: true})
			n.release(ctx, jobID, r.attempt)
		}
	}
}

// checkLease declares the node suspect after two missed heartbeats and lost once its lease
// expired; it also takes back attempts that stopped moving for the silence limit.
func (n *nodeActor) checkLease(ctx actor.Context) {
	now := n.c.Clock.Now()
	since := now.Sub(n.lastHeartbeat)
	switch n.state {
	case NodeReady, NodeDraining, NodeQuarantined, NodeSuspect:
	default:
		return
	}
	if since > n.c.cfg.NodeLease {
		n.c.Observer.LeaseExpired()
		n.lose(ctx, fmt.Sprintf("no heartbeat for %s (lease expired)", since.Round(time.Millisecond)))
		n.publish()
		return
	}
	if since > 2*n.c.cfg.HeartbeatInterval && n.state == NodeReady {
		n.setState(ctx, NodeSuspect, fmt.Sprintf("no heartbeat for %s", since.Round(time.Millisecond)))
	}
	limit := n.c.cfg.SilenceTimeout + n.c.cfg.NodeLease
	for jobID, r := range n.running {
		if now.Sub(r.progressAt) > limit {
			ctx.Send(n.agent, protocol.Wrap(&protocol.Abandon{Session: n.session, JobID: jobID.String(), Attempt: r.attempt, Reason: "no progress"}))
		}
	}
	n.loseAttempts(ctx, fmt.Sprintf("the render made no progress for %s", limit), func(_ ulid.ULID, r *heldAttempt) bool {
		return now.Sub(r.progressAt) > limit
	})
	n.publish()
}

// lose ends the node's lease: everything it held is queued again elsewhere, and anything it
// still reports of those attempts is fenced off.
func (n *nodeActor) lose(ctx actor.Context, reason string) {
	n.log.Warn("render node lost", "reason", reason, "attempts", len(n.running))
	n.loseAttempts(ctx, "render node lost: "+reason, func(ulid.ULID, *heldAttempt) bool { return true })
	n.setState(ctx, NodeLost, reason)
}

// hold quarantines (why) or drains (drainedByOperator) the node on the coordinator's side,
// durably; "" clears the hold.
func (n *nodeActor) hold(why string) {
	err := n.c.Store.Update(func(tx *persistence.Tx) error { return tx.SetMeta(nodeHoldKey(n.hello.NodeID), why) })
	if err != nil {
		n.log.Error("cannot record the node's hold", "err", err)
	}
	n.adminDrain, n.quarantine = why == drainedByOperator, ""
	if why != drainedByOperator {
		n.quarantine = why
	}
}

func (n *nodeActor) quarantineNode(ctx actor.Context, why string) {
	n.hold(why)
	n.log.Warn("render node quarantined: it takes no more work until an operator clears it", "reason", why)
	n.setState(ctx, NodeQuarantined, why)
}

func (n *nodeActor) command(ctx actor.Context, m *nodeCommand) {
	switch {
	case m.drain:
		// The node itself need not know: it finishes what it holds and is given nothing new.
		n.hold(drainedByOperator)
		n.setState(ctx, NodeDraining, drainedByOperator)
	case n.adminDrain || n.quarantine != "":
		n.hold("")
		clear(n.failStreak)
		if n.state == NodeDraining || n.state == NodeQuarantined {
			if n.hello.Draining {
				n.setState(ctx, NodeDraining, "the node is stopping")
			} else {
				n.setState(ctx, NodeReady, "")
			}
		}
	}
	n.publish()
	ctx.Respond(n.info())
}

// setState is the one place a node's state changes (checked against nodeTransitions); the
// scheduler hears of it.
func (n *nodeActor) setState(ctx actor.Context, state, why string) {
	prev := n.state
	if err := checkNodeTransition(prev, state); err != nil {
		n.log.Error("refused a node state change", "err", err)
		return
	}
	n.state, n.why = state, why
	switch {
	case state == NodeReady:
		busy := make(map[ulid.ULID]ulid.ULID, len(n.running))
		for id, r := range n.running {
			busy[id] = r.team
		}
		ctx.Send(n.c.scheduler, &nodeReady{nodeID: n.hello.NodeID, pid: ctx.Self(), engines: n.hello.Engines,
			slots: n.hello.Slots, requireTags: n.hello.RequireTags, busy: busy})
	case state == NodeLost || state == NodeLeft:
		ctx.Send(n.c.scheduler, &nodeGone{nodeID: n.hello.NodeID})
	default:
		ctx.Send(n.c.scheduler, &nodePaused{nodeID: n.hello.NodeID})
	}
	if prev != state {
		n.c.Observer.NodeStateChanged(n.hello.NodeID, prev, state)
	}
}

func (n *nodeActor) info() NodeInfo {
	jobs := make([]string, 0, len(n.running))
	for id := range n.running {
		jobs = append(jobs, id.String())
	}
	sort.Strings(jobs)
	return NodeInfo{
		ID:            n.hello.NodeID,
		Engines:       slices.Clone(n.hello.Engines),
		Slots:         n.hello.Slots,
		State:         n.state,
		Reason:        n.why,
		Version:       n.hello.Version,
		Labels:        n.hello.Labels,
		RequireTags:   n.hello.RequireTags,
		CurrentJobs:   jobs,
		LastHeartbeat: n.lastHeartbeat,
		FailStreak:    len(n.failStreak),
	}
}

func (n *nodeActor) publish() { n.c.nodes.put(n.info()) }

// NodeInfo is what GET /nodes shows of a node.
type NodeInfo struct {
	ID      string   `json:"id"`
	Engines []string `json:"engines"`
	Slots   int      `json:"slots"`
	State   string   `json:"state"`
	// Reason says why the node is in its state (lost, quarantined, draining).
	Reason        string            `json:"reason,omitempty"`
	Version       string            `json:"version"`
	Labels        map[string]string `json:"labels,omitempty"`
	RequireTags   []string          `json:"requireTags,omitempty"`
	CurrentJobs   []string          `json:"currentJobs"`
	LastHeartbeat time.Time         `json:"lastHeartbeat"`
	// FailStreak counts the different jobs that failed on the node since its last success.
	FailStreak int `json:"failStreak"`
}
