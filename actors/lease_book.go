package actors

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// NodeState is a render node's state as the coordinator sees it (STATE_MACHINE.md, "Render
// nodes").
type NodeState string

const (
	NodeJoined  NodeState = "joined"
	NodeReady   NodeState = "ready"
	NodeSuspect NodeState = "suspect"
	// NodeTesting: renders of different jobs failed on the node in a row, and it runs its
	// engines' self-test, which decides whether it is quarantined; it takes no work meanwhile.
	NodeTesting     NodeState = "testing"
	NodeDraining    NodeState = "draining"
	NodeQuarantined NodeState = "quarantined"
	NodeLost        NodeState = "lost"
	NodeLeft        NodeState = "left"
)

// NodeStates lists every node state, for metrics.
var NodeStates = []NodeState{NodeJoined, NodeReady, NodeSuspect, NodeTesting, NodeDraining, NodeQuarantined, NodeLost, NodeLeft}

// leaseBook is every rule of the coordinator's side of one render node's link, with no I/O of
// its own (as etcd's raft core): sessions, assignment sequence numbers, the attempts the node
// holds, its lease, its state, fail streaks and quarantine. Each event (a hello, a node's
// message, an assignment, a tick of the clock, an operator's command, a job settling a result)
// returns the effects it decides, in order; the nodeActor carries them out. Time and session
// tokens come in as arguments, so the rules are tested in microseconds (lease_book_test.go).
type leaseBook struct {
	rules leaseRules
	hello protocol.Hello
	state NodeState
	// why says what put the node in its state (lost, quarantined, drained).
	why string
	// session is the token of the node's last welcome; every later message in either direction
	// carries it.
	session string
	// seq numbers the assignments sent to the node since its current incarnation said hello.
	seq      uint64
	held     map[ulid.ULID]*heldAttempt
	lastBeat time.Time
	// failStreak holds the distinct jobs, with their engines, whose renders failed by what looks
	// like the node's own fault since its last finished render or self-test: one broken job
	// failing again is not the node's fault, many different ones may be, or they may be one
	// team's input crashing the engine. The node's self-test of those engines then decides
	// (testingSince: when it was asked for), so no team's jobs alone take a node from the farm.
	failStreak   map[ulid.ULID]string
	testingSince time.Time
	lastFailure  string
	// adminDrain: an operator drained the node; quarantine: why the node was quarantined. Both
	// are persisted (holdChanged) and hold until an operator clears the node.
	adminDrain bool
	quarantine string
	// settling are results forwarded to their jobs whose outcome is not yet durable: the node
	// is acknowledged once it is, and a copy the node resends meanwhile is dropped (for a lease;
	// after that it goes to the job again, whose write may have failed).
	settling map[attemptRef]settlingResult
	// past are the attempts the node held lately (taken back, or their result settled): what it still says of them goes to their jobs, which reject it as stale in the job's
	// log. A report of an attempt the node never held is refused here: no node speaks for
	// another.
	past []attemptRef
}

// pastKept is how many of the attempts a node held lately are kept (or four per slot, if more):
// the last ones, so that a node that renders many short jobs costs the coordinator little.
const pastKept = 16

// settlingResult is a result on its way to its job: which (done or failed), and since when. A
// different result for the same attempt is no copy: it goes to the job, which rejects it.
type settlingResult struct {
	done  bool
	since time.Time
}

// leaseRules are the timings and limits the book applies.
type leaseRules struct {
	// heartbeat is how often nodes beat; two beats missed make a node suspect.
	heartbeat time.Duration
	// lease is how long a node may stay silent before it is lost.
	lease time.Duration
	// stall is how long an attempt's progress may stand still before it is taken back.
	stall time.Duration
	// failureLimit is how many different jobs may fail in a row before the node runs its
	// self-test; selfTest how long the test may take before the node is quarantined for it.
	failureLimit int
	selfTest     time.Duration
	// key is the cluster key the welcome proves.
	key []byte
	// internalURL is the base of the coordinator's own file URLs, told to nodes in the welcome.
	internalURL string
}

type heldAttempt struct {
	attempt int
	team    ulid.ULID
	engine  string
	seq     uint64
	percent float64
	// progressAt is when the attempt last moved.
	progressAt time.Time
}

type attemptRef struct {
	job     ulid.ULID
	attempt int
}

// The effects the book decides; the nodeActor carries them out in the order given.
type (
	effect interface{ isEffect() }
	// reply answers the message being handled.
	reply struct{ msg any }
	// toAgent sends a message to the node's agent (an assignment, an abandon, a result's ack).
	toAgent struct{ msg any }
	// toJob tells a job of its render; settle asks it to say when its outcome of the attempt's
	// result is durable.
	toJob struct {
		job     ulid.ULID
		attempt int
		msg     any
		settle  bool
	}
	// slotFree gives the scheduler the slot of an attempt back.
	slotFree struct{ job ulid.ULID }
	// stateSet: the node's state was set (perhaps to the same one, with new capacity); the
	// scheduler hears of it.
	stateSet struct{ from, to NodeState }
	// holdChanged persists the node's drain or quarantine hold ("" clears it).
	holdChanged struct{ why string }
	// logged is a line for the log.
	logged struct {
		level slog.Level
		msg   string
		args  []any
	}
	// counted feeds a metric: leaseExpired, renderFinished, renderFailed, assigned, or refused
	// (a message without the node's current session, logged by the actor as a flood allows).
	counted struct {
		what   string
		waited time.Duration
	}
	// foreignReport: the node reported an attempt it does not hold (what: progress, done,
	// failure); it is refused, and logged with the node that holds it.
	foreignReport struct {
		job     ulid.ULID
		attempt int
		what    string
	}
	// uploadAsked: the node asks where to put an attempt's output in the farm's bucket; the
	// answer goes to the message's sender.
	uploadAsked struct {
		job     ulid.ULID
		attempt int
		req     *protocol.UploadRequest
	}
)

func (reply) isEffect()         {}
func (toAgent) isEffect()       {}
func (toJob) isEffect()         {}
func (slotFree) isEffect()      {}
func (stateSet) isEffect()      {}
func (holdChanged) isEffect()   {}
func (logged) isEffect()        {}
func (counted) isEffect()       {}
func (uploadAsked) isEffect()   {}
func (foreignReport) isEffect() {}

// Metrics the book counts.
const (
	countLeaseExpired   = "lease-expired"
	countRenderFinished = "render-finished"
	countRenderFailed   = "render-failed"
	countRefused        = "refused"
	countAssigned       = "assigned"
)

// drainedByOperator is the hold an operator's drain records.
const drainedByOperator = "drained by an operator"

// newLeaseBook starts the book of a node at its first hello; hold is what the store records for
// it (an operator's drain or a quarantine).
func newLeaseBook(rules leaseRules, hello *protocol.Hello, hold string) *leaseBook {
	b := &leaseBook{rules: rules, hello: *hello, state: NodeJoined, held: map[ulid.ULID]*heldAttempt{},
		failStreak: map[ulid.ULID]string{}, settling: map[attemptRef]settlingResult{}}
	if hold == drainedByOperator {
		b.adminDrain = true
	} else {
		b.quarantine = hold
	}
	return b
}

// effects collects what an event decides.
type effects []effect

func (e *effects) add(x ...effect) { *e = append(*e, x...) }

func (e *effects) log(level slog.Level, msg string, args ...any) {
	e.add(logged{level: level, msg: msg, args: args})
}

// onHello (re)admits the node with a new session. A new incarnation has lost what the previous
// one held; attempts it still holds that were rendering on it before a coordinator restart are
// adopted (claim takes them from the adoption book); attempts it holds that are not its
// assignments are abandoned, after the welcome, whose session they carry.
func (b *leaseBook) onHello(h *protocol.Hello, now time.Time, session string, claim func(job ulid.ULID, attempt int) (ulid.ULID, bool)) effects {
	var out effects
	if h.Incarnation != b.hello.Incarnation && b.heldBy(now) && hostOf(h.AgentAddress) != hostOf(b.hello.AgentAddress) {
		// Another machine under the id of a node still alive: two nodes given one id, not a
		// restart. The joining one is refused; the id is free again once the lease lapses.
		reason := fmt.Sprintf("node id %s is in use by a live node at %s (this node is at %s): give each node its own --id",
			h.NodeID, b.hello.AgentAddress, h.AgentAddress)
		out.log(slog.LevelWarn, "refused a node whose id a live node holds", "node", h.NodeID, "live_at", b.hello.AgentAddress, "joining_at", h.AgentAddress)
		out.add(reply{&protocol.Welcome{Accepted: false, Reason: reason, Nonce: h.Nonce}})
		return out
	}
	if h.Incarnation != b.hello.Incarnation || b.state == NodeLost || b.state == NodeLeft {
		b.loseAttempts(&out, "the render node restarted", func(id ulid.ULID, r *heldAttempt) bool {
			return !holds(h.Running, id, r.attempt)
		})
		b.seq = 0
	}
	b.hello = *h
	b.lastBeat = now
	b.testingSince = time.Time{} // a test asked of an earlier incarnation gets no answer
	for _, s := range h.Running {
		jobID := parseJobID(s.JobID)
		if _, known := b.held[jobID]; known {
			continue
		}
		if team, ok := claim(jobID, s.Attempt); ok {
			b.held[jobID] = &heldAttempt{attempt: s.Attempt, team: team, percent: s.Percent, progressAt: now}
			out.log(slog.LevelInfo, "adopted an attempt that outlived the coordinator's restart", "job", s.JobID, "attempt", s.Attempt)
			out.add(toJob{job: jobID, msg: &renderAdopted{attempt: s.Attempt, node: h.NodeID}})
		}
	}
	switch {
	case h.Draining:
		b.setState(&out, NodeDraining, "the node is stopping")
	case b.adminDrain:
		b.setState(&out, NodeDraining, drainedByOperator)
	case b.quarantine != "":
		b.setState(&out, NodeQuarantined, b.quarantine)
	default:
		b.setState(&out, NodeReady, "")
	}
	b.session = session
	out.log(slog.LevelInfo, "render node joined", "engines", h.Engines, "slots", h.Slots, "version", h.Version, "state", b.state)
	out.add(reply{&protocol.Welcome{Accepted: true, Session: session, Nonce: h.Nonce,
		Proof:       protocol.WelcomeProof(b.rules.key, h.Nonce, h.NodeID, session),
		InternalURL: b.rules.internalURL, HeartbeatInterval: b.rules.heartbeat, Lease: b.rules.lease, Seq: b.seq}})
	for _, a := range b.abandonList(h.Running) {
		out.add(toAgent{&a})
	}
	return out
}

// onMessage takes a node's message after its hello. One without the session of the node's last
// welcome (a forgery, or the node from before its last hello) changes nothing; a heartbeat is
// told to say hello.
func (b *leaseBook) onMessage(msg any, session string, now time.Time) effects {
	var out effects
	if session == "" || session != b.session {
		out.add(counted{what: countRefused})
		if _, ok := msg.(*protocol.Heartbeat); ok {
			out.add(reply{&protocol.HeartbeatAck{Known: false}})
		}
		return out
	}
	switch m := msg.(type) {
	case *protocol.Heartbeat:
		b.onHeartbeat(&out, m, now)
	case *protocol.Progress:
		jobID := parseJobID(m.JobID)
		r := b.held[jobID]
		switch {
		case r != nil && r.attempt == m.Attempt:
			if m.Percent != r.percent {
				r.percent, r.progressAt = m.Percent, now
			}
		case !b.heldLately(attemptRef{jobID, m.Attempt}):
			out.add(foreignReport{job: jobID, attempt: m.Attempt, what: "progress"})
			return out
		}
		out.add(toJob{job: jobID, msg: &renderProgress{attempt: m.Attempt, node: b.hello.NodeID, percent: m.Percent, log: m.Log,
			logAt: logTimes(m.Log, m.LogAt)}})
	case *protocol.SelfTested:
		b.onSelfTested(&out, m)
	case *protocol.Done:
		b.onResult(&out, parseJobID(m.JobID), m.Attempt, &renderDone{attempt: m.Attempt, node: b.hello.NodeID, duration: m.Duration, size: m.Size,
			output: m.Output, log: m.Log, logAt: logTimes(m.Log, m.LogAt)}, "", now)
	case *protocol.UploadRequest:
		jobID := parseJobID(m.JobID)
		if r := b.held[jobID]; r == nil || r.attempt != m.Attempt {
			out.add(reply{&protocol.UploadPlan{Error: "the node does not hold this attempt"}})
			break
		}
		out.add(uploadAsked{job: jobID, attempt: m.Attempt, req: m})
	case *protocol.Failed:
		// The farm's own storage out of reach says nothing of the job either: its attempt does
		// not count, and it waits a while before it runs again.
		farm := m.Fault == protocol.FaultFarm
		failed := &renderFailed{attempt: m.Attempt, node: b.hello.NodeID, err: m.Error, retryable: m.Retryable || farm, log: m.Log,
			logAt: logTimes(m.Log, m.LogAt), countless: m.NotStarted || farm, farm: farm}
		nodeFault := ""
		if !m.NotStarted && m.Fault == protocol.FaultNode {
			nodeFault = m.Error // the job's own input, or the farm's storage, says nothing of the node
		}
		b.onResult(&out, parseJobID(m.JobID), m.Attempt, failed, nodeFault, now)
	case *protocol.Drain:
		if b.state == NodeReady || b.state == NodeSuspect {
			b.setState(&out, NodeDraining, "the node is stopping")
		}
	case *protocol.Bye:
		b.lose(&out, "the node left the farm")
		b.setState(&out, NodeLeft, "the node left the farm")
		out.add(reply{&protocol.Ack{Kind: "bye"}})
	}
	return out
}

func (b *leaseBook) onHeartbeat(out *effects, hb *protocol.Heartbeat, now time.Time) {
	if hb.Incarnation != b.hello.Incarnation || b.state == NodeLost || b.state == NodeLeft || b.state == NodeJoined {
		out.add(reply{&protocol.HeartbeatAck{Known: false}})
		return
	}
	b.lastBeat = now
	if b.state == NodeSuspect {
		b.setState(out, NodeReady, "")
	}
	for _, s := range hb.Running {
		if r := b.held[parseJobID(s.JobID)]; r != nil && r.attempt == s.Attempt && s.Percent != r.percent {
			r.percent, r.progressAt = s.Percent, now
		}
	}
	// An assignment the node has seen but no longer holds ended without a result reaching us.
	b.loseAttempts(out, "the render node no longer holds the attempt", func(id ulid.ULID, r *heldAttempt) bool {
		return r.seq <= hb.Seq && !holds(hb.Running, id, r.attempt)
	})
	out.add(reply{&protocol.HeartbeatAck{Known: true, Abandon: b.abandonList(hb.Running)}})
}

// onResult forwards a result to its job, to be acknowledged once the job's outcome is durable;
// a copy the node resends before then is dropped. The slot is free at once. nodeFault, when not
// empty, is a failure of the node itself: it counts toward the node's quarantine.
func (b *leaseBook) onResult(out *effects, jobID ulid.ULID, attempt int, msg any, nodeFault string, now time.Time) {
	ref := attemptRef{jobID, attempt}
	_, done := msg.(*renderDone)
	if r := b.held[jobID]; (r == nil || r.attempt != attempt) && !b.heldLately(ref) {
		if _, settling := b.settling[ref]; !settling {
			what := "failure"
			if done {
				what = "done"
			}
			// Acknowledged all the same, so that a node which lost track of the attempt (the
			// coordinator restarted past its adoption) stops sending it; it changes nothing.
			out.add(foreignReport{job: jobID, attempt: attempt, what: what},
				toAgent{&protocol.FinalAck{Session: b.session, JobID: jobID.String(), Attempt: attempt}})
			return
		}
	}
	if s, ok := b.settling[ref]; ok && s.done == done && now.Sub(s.since) < b.rules.lease {
		return
	}
	b.settling[ref] = settlingResult{done: done, since: now}
	out.add(toJob{job: jobID, attempt: attempt, msg: msg, settle: true})
	var engine string
	if r := b.held[jobID]; r != nil {
		engine = r.engine
	}
	if !b.release(out, jobID, attempt) {
		return
	}
	switch m := msg.(type) {
	case *renderDone:
		clear(b.failStreak)
		out.add(counted{what: countRenderFinished})
		return
	case *renderFailed:
		if !m.countless {
			out.add(counted{what: countRenderFailed})
		}
	}
	if nodeFault == "" {
		return
	}
	b.failStreak[jobID] = engine
	if len(b.failStreak) >= b.rules.failureLimit && b.state == NodeReady {
		b.lastFailure = nodeFault
		b.testingSince = now
		engines := slices.Sorted(maps.Values(b.failStreak))
		engines = slices.DeleteFunc(slices.Compact(engines), func(e string) bool { return e == "" })
		why := b.streak() + ": its self-test decides whether the node is at fault"
		out.log(slog.LevelWarn, "render node testing itself: it takes no work until its self-test ends", "reason", why, "engines", engines)
		b.setState(out, NodeTesting, why)
		out.add(toAgent{&protocol.SelfTest{Session: b.session, Engines: engines}})
	}
}

// onSelfTested: the node's self-test ended. Passed, the failures were its jobs' (one team's
// input crashing the engine, say): the node goes back to work and its streak starts again.
// Failed, the node is at fault and is quarantined until an operator clears it.
func (b *leaseBook) onSelfTested(out *effects, m *protocol.SelfTested) {
	if b.state != NodeTesting {
		return
	}
	b.testingSince = time.Time{}
	if m.Passed {
		out.log(slog.LevelInfo, "render node kept in the farm: its self-test passed, so its failures in a row were its jobs'",
			"failures", len(b.failStreak), "last", b.lastFailure)
		clear(b.failStreak)
		b.setState(out, b.workingState(), "")
		return
	}
	b.quarantineFor(out, b.streak()+", and its self-test failed: "+m.Error)
}

// streak says what made the node test itself.
func (b *leaseBook) streak() string {
	return fmt.Sprintf("renders of %d different jobs failed in a row (the last: %s)", len(b.failStreak), b.lastFailure)
}

// quarantineFor holds the node out of the farm until an operator clears it.
func (b *leaseBook) quarantineFor(out *effects, why string) {
	b.testingSince = time.Time{}
	b.hold(out, why)
	out.log(slog.LevelWarn, "render node quarantined: it takes no more work until an operator clears it", "reason", why)
	b.setState(out, NodeQuarantined, why)
}

// workingState is the state a node in the farm is in when nothing else holds it: draining when
// it is stopping or an operator drained it, ready otherwise.
func (b *leaseBook) workingState() NodeState {
	if b.hello.Draining || b.adminDrain {
		return NodeDraining
	}
	return NodeReady
}

// onSettled: a job's outcome of a result is durable; the node may forget the result.
func (b *leaseBook) onSettled(jobID ulid.ULID, attempt int) effects {
	if _, ok := b.settling[attemptRef{jobID, attempt}]; ok {
		delete(b.settling, attemptRef{jobID, attempt})
		b.remember(attemptRef{jobID, attempt})
	}
	return effects{toAgent{&protocol.FinalAck{Session: b.session, JobID: jobID.String(), Attempt: attempt}}}
}

// onAssign gives the node an attempt the scheduler offered it, whose job is now rendering; a
// node no longer ready (the offer raced its loss or drain), or a task that could not be built,
// refuses it unstarted.
func (b *leaseBook) onAssign(jobID, team ulid.ULID, attempt int, task protocol.Task, taskErr error, waited time.Duration, now time.Time) effects {
	var out effects
	switch {
	case b.state != NodeReady:
		out.add(toJob{job: jobID, msg: &renderFailed{attempt: attempt, node: b.hello.NodeID, err: "the render node is " + string(b.state),
			retryable: true, countless: true}}, slotFree{jobID})
	case taskErr != nil:
		out.add(toJob{job: jobID, msg: &renderFailed{attempt: attempt, node: b.hello.NodeID, err: taskErr.Error()}}, slotFree{jobID})
	default:
		b.seq++
		b.held[jobID] = &heldAttempt{attempt: attempt, team: team, engine: task.Engine, seq: b.seq, progressAt: now}
		out.add(toAgent{&protocol.Assign{Session: b.session, Seq: b.seq, JobID: jobID.String(), Attempt: attempt, Task: task}},
			counted{what: countAssigned, waited: waited})
	}
	return out
}

// onTick checks the lease: two beats missed make the node suspect, a lease without one loses
// it; attempts whose progress stood still past the stall limit are taken back.
func (b *leaseBook) onTick(now time.Time) effects {
	var out effects
	switch b.state {
	case NodeReady, NodeDraining, NodeQuarantined, NodeSuspect, NodeTesting:
	default:
		return out
	}
	if b.state == NodeTesting && now.Sub(b.testingSince) > b.rules.selfTest {
		b.quarantineFor(&out, fmt.Sprintf("%s, and its self-test did not end within %s", b.streak(), b.rules.selfTest))
	}
	since := now.Sub(b.lastBeat)
	if since > b.rules.lease {
		out.add(counted{what: countLeaseExpired})
		b.lose(&out, fmt.Sprintf("no heartbeat for %s (lease expired)", since.Round(time.Millisecond)))
		return out
	}
	if since > 2*b.rules.heartbeat && b.state == NodeReady {
		b.setState(&out, NodeSuspect, fmt.Sprintf("no heartbeat for %s", since.Round(time.Millisecond)))
	}
	stalled := b.heldWhere(func(_ ulid.ULID, r *heldAttempt) bool { return now.Sub(r.progressAt) > b.rules.stall })
	for _, jobID := range stalled {
		out.add(toAgent{&protocol.Abandon{Session: b.session, JobID: jobID.String(), Attempt: b.held[jobID].attempt, Reason: "no progress"}})
	}
	b.loseAttempts(&out, fmt.Sprintf("the render made no progress for %s", b.rules.stall), func(id ulid.ULID, _ *heldAttempt) bool {
		return slices.Contains(stalled, id)
	})
	return out
}

// ticking reports whether the node's lease is watched: a lost or departed node has none until
// it says hello again.
func (b *leaseBook) ticking() bool { return b.state != NodeLost && b.state != NodeLeft }

// onLeft: membership saw an incarnation of the node leave or die; a later one is kept.
func (b *leaseBook) onLeft(incarnation, reason string) effects {
	var out effects
	if b.state != NodeLeft && b.state != NodeLost && incarnation == b.hello.Incarnation {
		b.lose(&out, reason)
	}
	return out
}

// onCommand is an operator's drain (the node finishes what it holds and is given nothing new;
// it need not know) or clear.
func (b *leaseBook) onCommand(drain bool) effects {
	var out effects
	switch {
	case drain:
		b.hold(&out, drainedByOperator)
		b.setState(&out, NodeDraining, drainedByOperator)
	case b.adminDrain || b.quarantine != "":
		b.hold(&out, "")
		clear(b.failStreak)
		if b.state == NodeDraining || b.state == NodeQuarantined {
			if b.hello.Draining {
				b.setState(&out, NodeDraining, "the node is stopping")
			} else {
				b.setState(&out, NodeReady, "")
			}
		}
	}
	return out
}

// onForget drops a lost or departed node's hold; a node still in the farm is kept (false).
func (b *leaseBook) onForget() (bool, effects) {
	if b.state != NodeLost && b.state != NodeLeft {
		return false, nil
	}
	var out effects
	b.hold(&out, "")
	return true, out
}

// onWithdraw takes back an attempt its job no longer wants (its owner stopped it): the slot comes
// back, and the node is told to stop the render and report nothing more of it.
func (b *leaseBook) onWithdraw(jobID ulid.ULID, attempt int, reason string) effects {
	var out effects
	if b.release(&out, jobID, attempt) {
		out.add(toAgent{&protocol.Abandon{Session: b.session, JobID: jobID.String(), Attempt: attempt, Reason: reason}})
	}
	return out
}

// abandonList names the attempts the node holds that are not (or no longer) its assignments.
// A result on its way is not abandoned: it is acknowledged, and fenced, when it arrives.
func (b *leaseBook) abandonList(held []protocol.AttemptStatus) []protocol.Abandon {
	var out []protocol.Abandon
	for _, s := range held {
		if r := b.held[parseJobID(s.JobID)]; (r == nil || r.attempt != s.Attempt) && s.Percent < 100 {
			out = append(out, protocol.Abandon{Session: b.session, JobID: s.JobID, Attempt: s.Attempt,
				Reason: "the attempt is no longer the job's current one"})
		}
	}
	return out
}

// release frees the slot of an attempt that ended; a report for an attempt the node no longer
// holds frees nothing and returns false.
func (b *leaseBook) release(out *effects, jobID ulid.ULID, attempt int) bool {
	r, ok := b.held[jobID]
	if !ok || r.attempt != attempt {
		return false
	}
	delete(b.held, jobID)
	b.remember(attemptRef{jobID, attempt})
	out.add(slotFree{jobID})
	return true
}

// remember keeps an attempt the node no longer holds among those it held lately, forgetting the
// oldest beyond the node's share.
func (b *leaseBook) remember(ref attemptRef) {
	b.past = slices.DeleteFunc(b.past, func(p attemptRef) bool { return p == ref })
	if limit := max(pastKept, 4*b.hello.Slots); len(b.past) >= limit {
		b.past = slices.Delete(b.past, 0, len(b.past)-limit+1)
	}
	b.past = append(b.past, ref)
}

// heldLately reports whether the node held the attempt lately.
func (b *leaseBook) heldLately(ref attemptRef) bool { return slices.Contains(b.past, ref) }

// loseAttempts fails the held attempts lost says are lost, in job order; their jobs are queued
// again.
func (b *leaseBook) loseAttempts(out *effects, reason string, lost func(ulid.ULID, *heldAttempt) bool) {
	for _, jobID := range b.heldWhere(lost) {
		r := b.held[jobID]
		out.log(slog.LevelWarn, "attempt lost", "job", jobID.String(), "attempt", r.attempt, "reason", reason)
		out.add(toJob{job: jobID, msg: &renderFailed{attempt: r.attempt, node: b.hello.NodeID, err: reason, retryable: true}})
		b.release(out, jobID, r.attempt)
	}
}

// lose ends the node's lease: everything it held is queued again elsewhere, and anything it
// still reports of those attempts is fenced off.
func (b *leaseBook) lose(out *effects, reason string) {
	out.log(slog.LevelWarn, "render node lost", "reason", reason, "attempts", len(b.held))
	b.loseAttempts(out, "render node lost: "+reason, func(ulid.ULID, *heldAttempt) bool { return true })
	b.setState(out, NodeLost, reason)
}

// hold records an operator's drain or a quarantine (why), or clears it ("").
func (b *leaseBook) hold(out *effects, why string) {
	b.adminDrain, b.quarantine = why == drainedByOperator, ""
	if why != drainedByOperator {
		b.quarantine = why
	}
	out.add(holdChanged{why})
}

// setState is the one place a node's state changes, checked against nodeTransitions.
func (b *leaseBook) setState(out *effects, state NodeState, why string) {
	if err := checkNodeTransition(b.state, state); err != nil {
		out.log(slog.LevelError, "refused a node state change", "err", err)
		return
	}
	prev := b.state
	b.state, b.why = state, why
	out.add(stateSet{from: prev, to: state})
}

// heldWhere lists, in id order (so effects come in a stable order), the jobs of the held
// attempts that match.
func (b *leaseBook) heldWhere(match func(ulid.ULID, *heldAttempt) bool) []ulid.ULID {
	var ids []ulid.ULID
	for id, r := range b.held {
		if match(id, r) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y ulid.ULID) int { return x.Compare(y) })
	return ids
}

// busy maps the held attempts' jobs to their teams, for the scheduler.
func (b *leaseBook) busy() map[ulid.ULID]ulid.ULID {
	out := make(map[ulid.ULID]ulid.ULID, len(b.held))
	for id, r := range b.held {
		out[id] = r.team
	}
	return out
}

func (b *leaseBook) info() NodeInfo {
	jobs := make([]string, 0, len(b.held))
	for id := range b.held {
		jobs = append(jobs, id.String())
	}
	sort.Strings(jobs)
	return NodeInfo{
		ID:            b.hello.NodeID,
		Engines:       slices.Clone(b.hello.Engines),
		Slots:         b.hello.Slots,
		State:         b.state,
		Reason:        b.why,
		Version:       b.hello.Version,
		Machine:       b.hello.Machine,
		Labels:        b.hello.Labels,
		RequireTags:   b.hello.RequireTags,
		Pools:         append([]string{}, b.hello.Pools...),
		CurrentJobs:   jobs,
		LastHeartbeat: b.lastBeat,
		FailStreak:    len(b.failStreak),
	}
}

// holds reports whether a node's list of attempts has this one.
func holds(list []protocol.AttemptStatus, jobID ulid.ULID, attempt int) bool {
	return slices.ContainsFunc(list, func(s protocol.AttemptStatus) bool { return s.JobID == jobID.String() && s.Attempt == attempt })
}

// logTimes reads the times a node gave its log lines; none when they do not match the lines
// one for one (the lines then take the time they are recorded).
func logTimes(lines []string, unixMillis []int64) []time.Time {
	if len(unixMillis) != len(lines) {
		return nil
	}
	at := make([]time.Time, len(unixMillis))
	for i, ms := range unixMillis {
		at[i] = time.UnixMilli(ms).UTC()
	}
	return at
}

// heldBy reports whether a live node holds this id now: welcomed, not lost or gone, and heard
// from within the lease.
func (b *leaseBook) heldBy(now time.Time) bool {
	switch b.state {
	case NodeReady, NodeDraining, NodeQuarantined, NodeSuspect, NodeTesting:
		return now.Sub(b.lastBeat) <= b.rules.lease
	}
	return false
}

// hostOf is the host part of an actor address ("" when it has none).
func hostOf(address string) string {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return address
	}
	return host
}
