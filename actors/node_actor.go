package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
)

// nodeActor stands for one render node inside the coordinator. Its rules are its leaseBook's;
// the actor only feeds the book events (the node's messages, assignments, ticks of the lease
// clock, operators' commands, jobs settling results) and carries out the effects the book
// returns: answers and messages to the node, reports to jobs, slots to the scheduler, holds to
// the store (written without blocking the mailbox), lines to the log and counts to metrics.
type nodeActor struct {
	w     *nodeWorld
	book  *leaseBook
	agent *actor.PID
	log   *slog.Logger
	tick  interface{ Stop() bool }
	// refusals throttles the log lines of messages refused for their session.
	refusals clock.Throttle
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
	// nodeCommand is an operator's drain or clear; it answers with the node's NodeInfo once the
	// hold is durable.
	nodeCommand struct{ drain bool }
	// forgetNode asks a lost or departed node's actor to clear its hold and stop; it answers
	// true once the hold is cleared for good, or ErrNodeActive.
	forgetNode struct{}
	// reportSettled: a job's outcome of a node's result is durable.
	reportSettled struct {
		jobID   ulid.ULID
		attempt int
	}
	// holdWritten: a hold the book decided is durable (err nil) or failed; answer, when set,
	// is the operator's command waiting for it.
	holdWritten struct {
		err    error
		answer func()
	}
)

// nodeWorld is what the node gateway and every NodeActor are given: the rules and timings of
// the node link, the store that keeps nodes' holds, the scheduler and the jobs they report to,
// the tasks of assignments, and the directory of nodes.
type nodeWorld struct {
	cfg   Config
	store interface {
		Meta(name string) string
		ApplyAsync(c persistence.Command, done func(error))
	}
	clock     clock.Clock
	events    *Events
	log       *slog.Logger
	root      *actor.RootContext
	addr      *addresses
	jobs      *jobDirectory
	adoptions *adoptionBook
	tasks     *taskBuilder
	nodes     *nodeDirectory
	// urls sign the URLs of the farm's files, whose base is told to nodes in the welcome.
	urls URLSigner
	// uploads plans nodes' uploads of outputs to the farm's bucket (nil: they go to urls).
	uploads OutputUploads
}

func newNodeActor(w *nodeWorld, hello *protocol.Hello) *nodeActor {
	// A quarantine or an operator's drain outlives the node's restarts and the coordinator's.
	hold := w.store.Meta(nodeHoldKey(hello.NodeID))
	rules := leaseRules{heartbeat: w.cfg.HeartbeatInterval, lease: w.cfg.NodeLease, stall: w.cfg.SilenceTimeout + w.cfg.NodeLease,
		failureLimit: w.cfg.NodeFailureLimit, selfTest: w.cfg.NodeSelfTestTimeout, key: w.cfg.ClusterKey, internalURL: w.urls.Base()}
	return &nodeActor{w: w, book: newLeaseBook(rules, hello, hold), log: w.log.With("node", hello.NodeID),
		refusals: clock.Throttle{Period: 10 * time.Second}}
}

func nodeHoldKey(nodeID string) string { return "node_hold/" + nodeID }

func (n *nodeActor) Receive(ctx actor.Context) {
	now := n.w.clock.Now()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		n.w.events.NodeStateChanged.Publish(NodeStateChanged{Node: n.book.hello.NodeID, To: NodeJoined})
	case *actor.Stopping:
		if n.tick != nil {
			n.tick.Stop()
		}
		return
	case *fromNode:
		if h, ok := m.msg.(*protocol.Hello); ok {
			n.agent = actor.NewPID(h.AgentAddress, h.AgentID)
			n.carryOut(ctx, m.sender, n.book.onHello(h, now, newToken(), n.w.adoptions.claimer(h.NodeID)), nil)
			n.w.nodes.setFonts(h.NodeID, n.book.hello.Fonts) // the welcomed hello's
			break
		}
		n.carryOut(ctx, m.sender, n.book.onMessage(m.msg, m.session, now), nil)
		if _, progress := m.msg.(*protocol.Progress); progress {
			return // the node's listing does not show progress: nothing to publish
		}
	case *assign:
		task, err := n.w.tasks.build(m.job)
		n.carryOut(ctx, nil, n.book.onAssign(m.job.ID, m.job.TeamID, m.job.Attempts, task, err, now.Sub(m.queuedAt), now), nil)
	case *withdrawAttempt:
		n.carryOut(ctx, nil, n.book.onWithdraw(m.jobID, m.attempt, m.reason), nil)
	case *reportSettled:
		n.carryOut(ctx, nil, n.book.onSettled(m.jobID, m.attempt), nil)
		return
	case *leaseTick:
		n.tick = nil
		n.carryOut(ctx, nil, n.book.onTick(now), nil)
	case *nodeLeft:
		n.carryOut(ctx, nil, n.book.onLeft(m.incarnation, m.reason), nil)
	case *nodeCommand:
		asker := ctx.Sender()
		n.carryOut(ctx, nil, n.book.onCommand(m.drain), func() { ctx.Send(asker, n.book.info()) })
	case *forgetNode:
		ok, out := n.book.onForget()
		if !ok {
			ctx.Respond(fmt.Errorf("%w: %s is %s", ErrNodeActive, n.book.hello.NodeID, n.book.state))
			return
		}
		asker := ctx.Sender()
		n.carryOut(ctx, nil, out, func() {
			n.w.events.NodeStateChanged.Publish(NodeStateChanged{Node: n.book.hello.NodeID, From: n.book.state})
			ctx.Send(asker, true)
			ctx.Stop(ctx.Self())
		})
		return
	case *holdWritten:
		if m.err != nil {
			n.log.Error("cannot record the node's hold", "err", m.err)
		}
		if m.answer != nil {
			m.answer()
		}
		return
	default:
		return
	}
	// A lost or departed node has no lease to watch until it says hello again.
	if n.tick == nil && n.book.ticking() {
		self, system := ctx.Self(), ctx.ActorSystem()
		n.tick = n.w.clock.AfterFunc(n.w.cfg.HeartbeatInterval, func() { system.Root.Send(self, &leaseTick{}) })
	}
	n.w.nodes.put(n.book.info())
}

// carryOut does what the book decided, in order; sender is whom a reply goes to. then, when
// given, runs once every hold written is durable (at once when none is).
func (n *nodeActor) carryOut(ctx actor.Context, sender *actor.PID, out effects, then func()) {
	for _, e := range out {
		switch e := e.(type) {
		case reply:
			if sender != nil {
				ctx.Send(sender, protocol.Wrap(e.msg))
			}
		case toAgent:
			ctx.Send(n.agent, protocol.Wrap(e.msg))
		case toJob:
			if e.settle {
				tellWhenDurable(e.msg, ctx.Self())
			}
			// A result for a job that does not exist has nothing to make durable.
			if err := n.w.jobs.tell(e.job, e.msg); e.settle && errors.Is(err, persistence.ErrNotFound) {
				n.carryOut(ctx, nil, n.book.onSettled(e.job, e.attempt), nil)
			}
		case slotFree:
			ctx.Send(n.w.addr.scheduler, &slotFreed{nodeID: n.book.hello.NodeID, jobID: e.job})
		case stateSet:
			n.tellScheduler(ctx, e.to)
			if e.from != e.to {
				// Who hears of the change reads the node's new state at once.
				n.w.nodes.put(n.book.info())
				n.w.events.NodeStateChanged.Publish(NodeStateChanged{Node: n.book.hello.NodeID, From: e.from, To: e.to})
			}
		case holdChanged:
			// Writes are committed in the order submitted, so the last hold decided wins.
			self, system, key, answer := ctx.Self(), ctx.ActorSystem(), nodeHoldKey(n.book.hello.NodeID), then
			then = nil
			n.w.store.ApplyAsync(&persistence.SetMeta{Name: key, Value: e.why},
				func(err error) { system.Root.Send(self, &holdWritten{err: err, answer: answer}) })
		case logged:
			n.log.Log(context.Background(), e.level, e.msg, e.args...)
		case counted:
			n.count(e)
		case uploadAsked:
			n.planUpload(sender, e)
		case foreignReport:
			n.w.events.NodeMessageRefused.Publish(NodeMessageRefused{Why: "attempt"})
			if pass, held := n.refusals.Allow("attempt", n.w.clock.Now()); pass {
				holder := n.w.nodes.holderOf(e.job.String())
				if holder == "" {
					holder = "none"
				}
				n.log.Warn("refused a report of an attempt the node does not hold", "job", e.job.String(), "attempt", e.attempt,
					"report", e.what, "held_by", holder, "refused_since_last_line", held)
			}
		}
	}
	if then != nil {
		then()
	}
}

// planUpload answers a node asking where to put an attempt's output in the farm's bucket: the
// plan is made (a multipart upload begun, URLs presigned) in a goroutine of its own, so the
// actor never waits on the bucket.
func (n *nodeActor) planUpload(sender *actor.PID, e uploadAsked) {
	refuse := func(why string) {
		if sender != nil {
			n.w.root.Send(sender, protocol.Wrap(&protocol.UploadPlan{Error: why}))
		}
	}
	if n.w.uploads == nil {
		refuse("this farm keeps outputs on the coordinator: PUT them to the assignment's URL")
		return
	}
	key, ok := persistence.AttemptOutputKey(e.job.String(), strconv.Itoa(e.attempt), e.req.Name)
	partSize := n.w.uploads.PartSize()
	parts := max(1, (e.req.Size+partSize-1)/partSize)
	switch {
	case !ok:
		refuse(fmt.Sprintf("%q is not an output name", e.req.Name))
		return
	case e.req.Size < 0 || e.req.Size > n.w.cfg.MaxOutputBytes:
		refuse(fmt.Sprintf("the output is %d bytes, not between 0 and the %d allowed", e.req.Size, n.w.cfg.MaxOutputBytes))
		return
	case int64(len(e.req.PartMD5)) != parts:
		refuse(fmt.Sprintf("an output of %d bytes has %d parts of %d bytes, not %d", e.req.Size, parts, partSize, len(e.req.PartMD5)))
		return
	}
	expires := n.w.clock.Now().Add(n.w.cfg.NodeURLTTL)
	go func() {
		plan, err := n.w.uploads.PlanUpload(context.Background(), key, e.req.PartMD5, expires)
		if err != nil {
			n.log.Warn("cannot plan an output's upload to the object store", "job", e.job.String(), "attempt", e.attempt, "err", err)
			refuse("the object store cannot take the output now: " + err.Error())
			return
		}
		n.log.Debug("planned an output's upload to the object store", "job", e.job.String(), "attempt", e.attempt, "parts", len(plan.Parts))
		answer := &protocol.UploadPlan{UploadID: plan.UploadID}
		for _, p := range plan.Parts {
			answer.Parts = append(answer.Parts, protocol.PartTarget{URL: p.URL, Header: p.Header})
		}
		if sender != nil {
			n.w.root.Send(sender, protocol.Wrap(answer))
		}
	}()
}

// tellWhenDurable asks the job to tell pid once its outcome of the result is durable.
func tellWhenDurable(msg any, pid *actor.PID) {
	switch m := msg.(type) {
	case *renderDone:
		m.settle = pid
	case *renderFailed:
		m.settle = pid
	}
}

// tellScheduler gives the scheduler the node's state: ready with what it holds, gone, or paused.
func (n *nodeActor) tellScheduler(ctx actor.Context, state NodeState) {
	h := n.book.hello
	switch state {
	case NodeReady:
		ctx.Send(n.w.addr.scheduler, &nodeReady{nodeID: h.NodeID, pid: ctx.Self(), engines: h.Engines, slots: h.Slots,
			requireTags: h.RequireTags, pools: h.Pools, busy: n.book.busy()})
	case NodeLost, NodeLeft:
		ctx.Send(n.w.addr.scheduler, &nodeGone{nodeID: h.NodeID})
	default:
		ctx.Send(n.w.addr.scheduler, &nodePaused{nodeID: h.NodeID, state: state})
	}
}

func (n *nodeActor) count(c counted) {
	id := n.book.hello.NodeID
	switch c.what {
	case countLeaseExpired:
		n.w.events.LeaseExpired.Publish(LeaseExpired{Node: id})
	case countRenderFinished:
		n.w.events.NodeRendered.Publish(NodeRendered{Node: id, OK: true})
	case countRenderFailed:
		n.w.events.NodeRendered.Publish(NodeRendered{Node: id})
	case countRefused:
		n.w.events.NodeMessageRefused.Publish(NodeMessageRefused{Why: "session"})
		if pass, held := n.refusals.Allow("session", n.w.clock.Now()); pass {
			n.log.Warn("refused a message without the node's current session", "refused_since_last_line", held)
		}
	case countAssigned:
		n.w.events.Assigned.Publish(Assigned{Waited: c.waited})
	}
}

// newToken makes an unguessable token: a session, a challenge's nonce.
func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// NodeInfo is what GET /nodes shows of a node.
type NodeInfo struct {
	ID      string    `json:"id"`
	Engines []string  `json:"engines"`
	Slots   int       `json:"slots"`
	State   NodeState `json:"state"`
	// Reason says why the node is in its state (lost, quarantined, draining).
	Reason        string            `json:"reason,omitempty"`
	Version       string            `json:"version"`
	Labels        map[string]string `json:"labels,omitempty"`
	RequireTags   []string          `json:"requireTags,omitempty"`
	Pools         []string          `json:"pools"`
	CurrentJobs   []string          `json:"currentJobs"`
	LastHeartbeat time.Time         `json:"lastHeartbeat"`
	// FailStreak counts the different jobs that failed on the node since its last success.
	FailStreak int `json:"failStreak"`
	// Machine is what the node runs on, as it said.
	Machine *protocol.Machine `json:"machine,omitempty"`
}
