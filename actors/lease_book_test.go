package actors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// The lease book's rules, one table row a case: each case feeds a fresh book a sequence of
// events at times on a made-up clock and checks the effects of each (logs left out) and the
// node's state after it. No actor, store or network: the whole table runs in microseconds.

var (
	bookStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	bookJobs  = map[string]ulid.ULID{}
	bookTeam  = ulid.MustParse("01JTEAM0000000000000000000")
	bookKey   = []byte("book-key-0123456789")
)

// job names a job of the tests (J1, J2, ...) by a fixed id.
func job(name string) ulid.ULID {
	if id, ok := bookJobs[name]; ok {
		return id
	}
	id := ulid.MustParse(fmt.Sprintf("01J%023d", len(bookJobs)+1))
	bookJobs[name] = id
	return id
}

func jobName(id ulid.ULID) string {
	for name, j := range bookJobs {
		if j == id {
			return name
		}
	}
	return id.String()
}

func rules() leaseRules {
	return leaseRules{heartbeat: time.Second, lease: 5 * time.Second, stall: 20 * time.Second, failureLimit: 2, selfTest: 30 * time.Second,
		key: bookKey, internalURL: "http://coordinator/files/"}
}

func hello(incarnation string, running ...protocol.AttemptStatus) *protocol.Hello {
	return &protocol.Hello{NodeID: "n1", Incarnation: incarnation, Engines: []string{"lottie"}, Slots: 2, Nonce: "c-" + incarnation, Running: running}
}

// helloFrom is a hello of a node whose agent is at address.
func helloFrom(incarnation, address string) *protocol.Hello {
	h := hello(incarnation)
	h.AgentAddress = address
	return h
}

func at(name string, attempt int, percent float64) protocol.AttemptStatus {
	return protocol.AttemptStatus{JobID: job(name).String(), Attempt: attempt, Percent: percent}
}

// render writes effects as the table states them.
func render(out effects) []string {
	var lines []string
	for _, e := range out {
		switch e := e.(type) {
		case reply:
			lines = append(lines, "reply "+describeMsg(e.msg))
		case toAgent:
			lines = append(lines, "agent "+describeMsg(e.msg))
		case toJob:
			line := "job " + jobName(e.job) + " " + describeMsg(e.msg)
			if e.settle {
				line += " (settle)"
			}
			lines = append(lines, line)
		case slotFree:
			lines = append(lines, "free "+jobName(e.job))
		case stateSet:
			lines = append(lines, fmt.Sprintf("state %s->%s", e.from, e.to))
		case holdChanged:
			lines = append(lines, fmt.Sprintf("hold %q", e.why))
		case counted:
			lines = append(lines, "count "+e.what)
		case foreignReport:
			lines = append(lines, fmt.Sprintf("foreign %s %s/%d", e.what, jobName(e.job), e.attempt))
		}
	}
	return lines
}

func describeMsg(msg any) string {
	switch m := msg.(type) {
	case *protocol.Welcome:
		if !m.Accepted {
			return "refused: " + m.Reason
		}
		return fmt.Sprintf("welcome session=%s seq=%d", m.Session, m.Seq)
	case *protocol.HeartbeatAck:
		if !m.Known {
			return "unknown"
		}
		var names []string
		for _, a := range m.Abandon {
			names = append(names, fmt.Sprintf("%s/%d", jobName(parseJobID(a.JobID)), a.Attempt))
		}
		return "known abandon=" + strings.Join(names, ",")
	case *protocol.Assign:
		return fmt.Sprintf("assign %s/%d seq=%d session=%s", jobName(parseJobID(m.JobID)), m.Attempt, m.Seq, m.Session)
	case *protocol.Abandon:
		return fmt.Sprintf("abandon %s/%d session=%s", jobName(parseJobID(m.JobID)), m.Attempt, m.Session)
	case *protocol.FinalAck:
		return fmt.Sprintf("ack %s/%d session=%s", jobName(parseJobID(m.JobID)), m.Attempt, m.Session)
	case *protocol.Ack:
		return "ack " + m.Kind
	case *protocol.SelfTest:
		return fmt.Sprintf("self-test %s session=%s", strings.Join(m.Engines, ","), m.Session)
	case *renderProgress:
		return fmt.Sprintf("progress/%d", m.attempt)
	case *renderDone:
		return fmt.Sprintf("done/%d", m.attempt)
	case *renderAdopted:
		return fmt.Sprintf("adopted/%d", m.attempt)
	case *renderFailed:
		s := fmt.Sprintf("failed/%d: %s", m.attempt, m.err)
		if m.retryable {
			s += " [retry]"
		}
		if m.countless {
			s += " [uncounted]"
		}
		return s
	}
	return fmt.Sprintf("%T", msg)
}

// step is one event at a time after the start, its effects and the state after it.
type step struct {
	at    time.Duration
	event func(b *leaseBook, now time.Time) effects
	want  []string
	state NodeState
}

// Events, as the table writes them.
func sayHello(h *protocol.Hello, session string, adoptable ...string) func(*leaseBook, time.Time) effects {
	return func(b *leaseBook, now time.Time) effects {
		return b.onHello(h, now, session, func(id ulid.ULID, _ int) (ulid.ULID, bool) {
			return bookTeam, slices.Contains(adoptable, jobName(id))
		})
	}
}

func send(session string, msg any) func(*leaseBook, time.Time) effects {
	return func(b *leaseBook, now time.Time) effects { return b.onMessage(msg, session, now) }
}

func beat(session string, seq uint64, held ...protocol.AttemptStatus) func(*leaseBook, time.Time) effects {
	return send(session, &protocol.Heartbeat{Incarnation: "i1", Seq: seq, Running: held})
}

func give(name string, attempt int) func(*leaseBook, time.Time) effects {
	return giveFor(bookTeam, name, attempt)
}

func giveFor(team ulid.ULID, name string, attempt int) func(*leaseBook, time.Time) effects {
	return func(b *leaseBook, now time.Time) effects {
		return b.onAssign(job(name), team, attempt, protocol.Task{Engine: "lottie"}, nil, 0, now)
	}
}

func done(session, name string, attempt int) func(*leaseBook, time.Time) effects {
	return send(session, &protocol.Done{JobID: job(name).String(), Attempt: attempt})
}

// failed is a failure of the node itself (or, notStarted, a refusal).
func failed(session, name string, attempt int, notStarted bool) func(*leaseBook, time.Time) effects {
	return send(session, &protocol.Failed{JobID: job(name).String(), Attempt: attempt, Error: "boom", NotStarted: notStarted, Fault: protocol.FaultNode})
}

// failedBy is a started render's failure, fault saying whose it is.
func failedBy(session, name string, attempt int, fault protocol.Fault) func(*leaseBook, time.Time) effects {
	return send(session, &protocol.Failed{JobID: job(name).String(), Attempt: attempt, Error: "bad input", Fault: fault})
}

// selfTested is the node's answer to its self-test ("" passed).
func selfTested(session, failure string) func(*leaseBook, time.Time) effects {
	return send(session, &protocol.SelfTested{Passed: failure == "", Error: failure})
}

func settle(name string, attempt int) func(*leaseBook, time.Time) effects {
	return func(b *leaseBook, _ time.Time) effects { return b.onSettled(job(name), attempt) }
}

func tick(b *leaseBook, now time.Time) effects { return b.onTick(now) }

func command(drain bool) func(*leaseBook, time.Time) effects {
	return func(b *leaseBook, _ time.Time) effects { return b.onCommand(drain) }
}

const welcomed = "state joined->ready"

// none is a step's want when it decides nothing (a nil want is not checked).
var none = []string{}

func TestLeaseBook(t *testing.T) {
	s := time.Second
	cases := []struct {
		name string
		// hold is what the store records for the node when its book is made.
		hold  string
		steps []step
	}{
		{name: "a first hello makes the node ready, with a session and no assignment counted", steps: []step{
			{event: sayHello(hello("i1"), "s1"), want: []string{welcomed, "reply welcome session=s1 seq=0"}, state: NodeReady},
		}},
		{name: "another machine under a live node's id is refused, naming both; once the lease lapsed it is a restart", steps: []step{
			{event: sayHello(helloFrom("i1", "10.0.0.1:7947"), "s1"), state: NodeReady},
			{at: 1 * s, event: sayHello(helloFrom("i2", "10.0.0.2:7947"), "s2"), want: []string{
				"reply refused: node id n1 is in use by a live node at 10.0.0.1:7947 (this node is at 10.0.0.2:7947): give each node its own --id"}, state: NodeReady},
			// The same machine under a new incarnation: the node restarted.
			{at: 2 * s, event: sayHello(helloFrom("i2", "10.0.0.1:40111"), "s3"), want: []string{"state ready->ready", "reply welcome session=s3 seq=0"}, state: NodeReady},
		}},
		{name: "a node of another machine takes the id of one whose lease lapsed", steps: []step{
			{event: sayHello(helloFrom("i1", "10.0.0.1:7947"), "s1"), state: NodeReady},
			{at: 6 * s, event: sayHello(helloFrom("i2", "10.0.0.2:7947"), "s2"), want: []string{"state ready->ready", "reply welcome session=s2 seq=0"}, state: NodeReady},
		}},
		{name: "a recorded drain or quarantine holds at the first hello", hold: drainedByOperator, steps: []step{
			{event: sayHello(hello("i1"), "s1"), want: []string{"state joined->draining", "reply welcome session=s1 seq=0"}, state: NodeDraining},
			{event: command(false), want: []string{`hold ""`, "state draining->ready"}, state: NodeReady},
		}},
		{name: "assignments carry the session and count on; a node not ready refuses unstarted", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1), want: []string{"agent assign J1/1 seq=1 session=s1", "count assigned"}},
			{event: give("J2", 1), want: []string{"agent assign J2/1 seq=2 session=s1", "count assigned"}},
			{event: command(true), want: []string{`hold "drained by an operator"`, "state ready->draining"}, state: NodeDraining},
			{event: give("J3", 1), want: []string{"job J3 failed/1: the render node is draining [retry] [uncounted]", "free J3"}},
		}},
		{name: "an attempt its owner stopped is withdrawn: its slot comes back and the node abandons it, once; a stale attempt is not", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 2)},
			{event: func(b *leaseBook, _ time.Time) effects { return b.onWithdraw(job("J1"), 1, "stopped") }, want: none},
			{event: func(b *leaseBook, _ time.Time) effects { return b.onWithdraw(job("J1"), 2, "stopped by team acme") }, want: []string{
				"free J1", "agent abandon J1/2 session=s1"}},
			{event: func(b *leaseBook, _ time.Time) effects { return b.onWithdraw(job("J1"), 2, "stopped by team acme") }, want: none},
			{at: s, event: beat("s1", 1, at("J1", 2, 40)), want: []string{"reply known abandon=J1/2"}},
		}},
		{name: "reports of an attempt the node never held are refused (results acknowledged, changing nothing); of one it held lately they go to the job, which rejects them as stale", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: send("s1", &protocol.Progress{JobID: job("J2").String(), Attempt: 1, Percent: 66, Log: []string{"forged"}}), want: []string{
				"foreign progress J2/1"}},
			{event: done("s1", "J2", 1), want: []string{"foreign done J2/1", "agent ack J2/1 session=s1"}},
			{event: failed("s1", "J2", 1, false), want: []string{"foreign failure J2/1", "agent ack J2/1 session=s1"}},
			{event: done("s1", "J1", 2), want: []string{"foreign done J1/2", "agent ack J1/2 session=s1"}},
			{event: send("s1", &protocol.Progress{JobID: job("J1").String(), Attempt: 1, Percent: 10}), want: []string{"job J1 progress/1"}},
			{event: func(b *leaseBook, _ time.Time) effects { return b.onWithdraw(job("J1"), 1, "stopped") }, want: []string{
				"free J1", "agent abandon J1/1 session=s1"}},
			// The node had not yet heard of the abandon.
			{event: send("s1", &protocol.Progress{JobID: job("J1").String(), Attempt: 1, Percent: 20}), want: []string{"job J1 progress/1"}},
			{event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)"}, state: NodeReady},
		}},
		{name: "a task that could not be built fails its attempt", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: func(b *leaseBook, now time.Time) effects {
				return b.onAssign(job("J1"), bookTeam, 1, protocol.Task{}, errors.New("secret gone"), 0, now)
			}, want: []string{"job J1 failed/1: secret gone", "free J1"}},
		}},
		{name: "two beats missed make the node suspect, a beat makes it ready, a lease without one loses it and its work", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{at: 1 * s, event: beat("s1", 1, at("J1", 1, 10)), want: []string{"reply known abandon="}},
			{at: 2 * s, event: tick, want: none, state: NodeReady},
			{at: 3500 * time.Millisecond, event: tick, want: []string{"state ready->suspect"}, state: NodeSuspect},
			{at: 4 * s, event: beat("s1", 1, at("J1", 1, 20)), want: []string{"state suspect->ready", "reply known abandon="}, state: NodeReady},
			{at: 9500 * time.Millisecond, event: tick, want: []string{"count lease-expired",
				"job J1 failed/1: render node lost: no heartbeat for 5.5s (lease expired) [retry]", "free J1", "state ready->lost"}, state: NodeLost},
			{at: 10 * s, event: beat("s1", 1, at("J1", 1, 30)), want: []string{"reply unknown"}, state: NodeLost},
			{at: 11 * s, event: tick, want: none, state: NodeLost},
		}},
		{name: "a heartbeat loses what the node saw and no longer holds, keeps what it has not seen yet, abandons what is not its own", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: give("J2", 1)},
			// The beat was composed after the first assignment arrived and before the second:
			// J2 is on its way (seq 2 > 1), J1 ended without a result, J9 is a stranger.
			{at: s, event: beat("s1", 1, at("J9", 4, 50), at("J8", 2, 100)), want: []string{
				"job J1 failed/1: the render node no longer holds the attempt [retry]", "free J1", "reply known abandon=J9/4"}},
			{at: 2 * s, event: beat("s1", 2, at("J2", 1, 5)), want: []string{"reply known abandon="}},
		}},
		{name: "a result goes to its job to settle, its slot is free at once, a copy resent meanwhile is dropped, and the node is acknowledged once settled", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)", "free J1", "count render-finished"}},
			{event: done("s1", "J1", 1), want: none},
			{at: s, event: beat("s1", 1, at("J1", 1, 100)), want: []string{"reply known abandon="}},
			{event: settle("J1", 1), want: []string{"agent ack J1/1 session=s1"}},
			{event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)"}},
		}},
		{name: "a different result for an attempt whose result is settling is no copy: it goes to the job, which rejects it", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)", "free J1", "count render-finished"}},
			{event: failed("s1", "J1", 1, false), want: []string{"job J1 failed/1: boom (settle)"}},
			{event: failed("s1", "J1", 1, false), want: none},
		}},
		{name: "a result its job has not settled within a lease goes to the job again when resent", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)", "free J1", "count render-finished"}},
			{at: 4 * s, event: done("s1", "J1", 1), want: none},
			{at: 6 * s, event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)"}},
		}},
		{name: "renders of different jobs failing in a row make the node test itself, a failed test quarantines it; one job failing again counts once; a refusal counts not", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: failed("s1", "J1", 1, false), want: []string{"job J1 failed/1: boom (settle)", "free J1", "count render-failed"}},
			{event: give("J1", 2)},
			{event: failed("s1", "J1", 2, false), want: []string{"job J1 failed/2: boom (settle)", "free J1", "count render-failed"}, state: NodeReady},
			{event: give("J2", 1)},
			{event: failed("s1", "J2", 1, true), want: []string{"job J2 failed/1: boom [uncounted] (settle)", "free J2"}, state: NodeReady},
			{event: give("J3", 1)},
			{event: failed("s1", "J3", 1, false), want: []string{"job J3 failed/1: boom (settle)", "free J3", "count render-failed",
				"state ready->testing", "agent self-test lottie session=s1"}, state: NodeTesting},
			{event: give("J4", 1), want: []string{"job J4 failed/1: the render node is testing [retry] [uncounted]", "free J4"}},
			{event: selfTested("forged", "no"), want: []string{"count refused"}, state: NodeTesting},
			{event: selfTested("s1", "ffmpeg cannot start"), want: []string{
				`hold "renders of 2 different jobs failed in a row (the last: boom), and its self-test failed: ffmpeg cannot start"`,
				"state testing->quarantined"}, state: NodeQuarantined},
			{event: command(false), want: []string{`hold ""`, "state quarantined->ready"}, state: NodeReady},
		}},
		{name: "a self-test that passes keeps the node in the farm, whoever's jobs failed, right after a start too; the streak starts again", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: failed("s1", "J1", 1, false)},
			{event: give("J2", 1)},
			{event: failed("s1", "J2", 1, false), state: NodeTesting},
			{event: selfTested("s1", ""), want: []string{"state testing->ready"}, state: NodeReady},
			{event: give("J3", 1)},
			{event: failed("s1", "J3", 1, false), want: []string{"job J3 failed/1: boom (settle)", "free J3", "count render-failed"}, state: NodeReady},
			{event: selfTested("s1", "late"), want: none, state: NodeReady},
		}},
		{name: "a self-test that does not end in time quarantines the node; the lease still holds meanwhile", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: failed("s1", "J1", 1, false)},
			{event: give("J2", 1)},
			{event: failed("s1", "J2", 1, false), state: NodeTesting},
			{at: 4 * s, event: beat("s1", 2), state: NodeTesting},
			{at: 8 * s, event: beat("s1", 2), state: NodeTesting},
			{at: 31 * s, event: tick, want: []string{
				`hold "renders of 2 different jobs failed in a row (the last: boom), and its self-test did not end within 30s"`,
				"state testing->quarantined", "count lease-expired", "state quarantined->lost"}, state: NodeLost},
		}},
		{name: "failures of a job's own input or of the farm's storage never count toward a quarantine; the farm's cost the job no attempt", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: failedBy("s1", "J1", 1, protocol.FaultJob), want: []string{"job J1 failed/1: bad input (settle)", "free J1", "count render-failed"}},
			{event: give("J2", 1)},
			{event: failedBy("s1", "J2", 1, protocol.FaultFarm), want: []string{"job J2 failed/1: bad input [retry] [uncounted] (settle)", "free J2"}},
			{event: give("J3", 1)},
			{event: failedBy("s1", "J3", 1, protocol.FaultJob), want: []string{"job J3 failed/1: bad input (settle)", "free J3", "count render-failed"}},
			{event: give("J4", 1)},
			{event: failed("s1", "J4", 1, false), want: []string{"job J4 failed/1: boom (settle)", "free J4", "count render-failed"}, state: NodeReady},
		}},
		{name: "a finished render clears the fail streak", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: failed("s1", "J1", 1, false)},
			{event: give("J2", 1)},
			{event: done("s1", "J2", 1)},
			{event: give("J3", 1)},
			{event: failed("s1", "J3", 1, false), want: []string{"job J3 failed/1: boom (settle)", "free J3", "count render-failed"}, state: NodeReady},
		}},
		{name: "messages without the current session change nothing; an old session's heartbeat is told to say hello", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: done("forged", "J1", 1), want: []string{"count refused"}},
			{event: sayHello(hello("i1", at("J1", 1, 50)), "s2"), want: []string{"state ready->ready", "reply welcome session=s2 seq=1"}},
			{event: done("s1", "J1", 1), want: []string{"count refused"}},
			{at: s, event: beat("s1", 1, at("J1", 1, 60)), want: []string{"count refused", "reply unknown"}},
			{event: send("", &protocol.Drain{}), want: []string{"count refused"}, state: NodeReady},
			{event: done("s2", "J1", 1), want: []string{"job J1 done/1 (settle)", "free J1", "count render-finished"}},
		}},
		{name: "the same run saying hello again keeps its work and count; a new run loses what it does not hold and counts from 0", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: give("J2", 1)},
			{event: sayHello(hello("i1", at("J1", 1, 50), at("J2", 1, 0)), "s2"), want: []string{"state ready->ready", "reply welcome session=s2 seq=2"}},
			// Restarted: its crash left J1's marker (a result at 100%), J2 is gone.
			{event: sayHello(hello("i2", at("J1", 1, 100)), "s3"), want: []string{
				"job J2 failed/1: the render node restarted [retry]", "free J2", "state ready->ready", "reply welcome session=s3 seq=0"}},
			{event: failed("s3", "J1", 1, false), want: []string{"job J1 failed/1: boom (settle)", "free J1", "count render-failed"}},
		}},
		{name: "assignments after a welcome carry its session and count on from its count", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: give("J2", 1)},
			{event: sayHello(hello("i1", at("J1", 1, 10), at("J2", 1, 10)), "s2"), want: []string{"state ready->ready", "reply welcome session=s2 seq=2"}},
			{event: give("J3", 1), want: []string{"agent assign J3/1 seq=3 session=s2", "count assigned"}},
			{at: s, event: beat("s2", 2, at("J1", 1, 20), at("J2", 1, 20)), want: []string{"reply known abandon="}},
		}},
		{name: "after a coordinator restart the node adopts what it still renders; the rest is abandoned after the welcome, results on their way are not", steps: []step{
			{event: sayHello(hello("i1", at("J1", 1, 40), at("J2", 3, 40), at("J3", 1, 100)), "s1", "J1"), want: []string{
				"job J1 adopted/1", welcomed, "reply welcome session=s1 seq=0", "agent abandon J2/3 session=s1"}, state: NodeReady},
			{at: s, event: beat("s1", 0, at("J1", 1, 45)), want: []string{"reply known abandon="}},
			{event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)", "free J1", "count render-finished"}},
		}},
		{name: "a render whose progress stands still past the stall limit is abandoned and lost, though the node beats", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{at: 10 * s, event: beat("s1", 1, at("J1", 1, 30)), want: []string{"reply known abandon="}},
			{at: 11 * s, event: send("s1", &protocol.Progress{JobID: job("J1").String(), Attempt: 1, Percent: 30}), want: []string{"job J1 progress/1"}},
			{at: 29 * s, event: beat("s1", 1, at("J1", 1, 30))},
			{at: 30500 * time.Millisecond, event: tick, want: []string{"agent abandon J1/1 session=s1",
				"job J1 failed/1: the render made no progress for 20s [retry]", "free J1"}, state: NodeReady},
		}},
		{name: "membership's word ends the lease of the incarnation it saw, not a later one", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: give("J1", 1)},
			{event: func(b *leaseBook, _ time.Time) effects { return b.onLeft("i0", "dead") }, want: none, state: NodeReady},
			{event: func(b *leaseBook, _ time.Time) effects { return b.onLeft("i1", "dead") }, want: []string{
				"job J1 failed/1: render node lost: dead [retry]", "free J1", "state ready->lost"}, state: NodeLost},
		}},
		{name: "a draining node keeps its work and leaves with a goodbye; a departed node can be forgotten, one in the farm not", steps: []step{
			{event: sayHello(hello("i1"), "s1"), state: NodeReady},
			{event: func(b *leaseBook, _ time.Time) effects {
				if ok, _ := b.onForget(); ok {
					return effects{reply{"forgotten"}}
				}
				return nil
			}, want: none},
			{event: give("J1", 1)},
			{event: send("s1", &protocol.Drain{}), want: []string{"state ready->draining"}, state: NodeDraining},
			{event: give("J2", 1), want: []string{"job J2 failed/1: the render node is draining [retry] [uncounted]", "free J2"}},
			{event: done("s1", "J1", 1), want: []string{"job J1 done/1 (settle)", "free J1", "count render-finished"}},
			{event: send("s1", &protocol.Bye{}), want: []string{"state draining->lost", "state lost->left", "reply ack bye"}, state: NodeLeft},
			{event: func(b *leaseBook, _ time.Time) effects {
				_, out := b.onForget()
				return out
			}, want: []string{`hold ""`}, state: NodeLeft},
		}},
		{name: "an operator's clear lets a node that drains itself go on draining", steps: []step{
			{event: sayHello(&protocol.Hello{NodeID: "n1", Incarnation: "i1", Slots: 1, Draining: true, Nonce: "c"}, "s1"), state: NodeDraining},
			{event: command(true), want: []string{`hold "drained by an operator"`, "state draining->draining"}},
			{event: command(false), want: []string{`hold ""`, "state draining->draining"}, state: NodeDraining},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newLeaseBook(rules(), hello("i1"), c.hold)
			for i, st := range c.steps {
				out := st.event(b, bookStart.Add(st.at))
				if got := render(out); st.want != nil && !slices.Equal(got, st.want) {
					t.Fatalf("step %d:\n got  %q\n want %q", i+1, got, st.want)
				}
				if st.state != "" && b.state != st.state {
					t.Fatalf("step %d: state %s, want %s", i+1, b.state, st.state)
				}
			}
		})
	}
}

// TestLeaseBookWelcomeProvesTheKey: the welcome answers the hello's nonce and proves the key;
// it tells the node where the coordinator's files are.
func TestLeaseBookWelcomeProvesTheKey(t *testing.T) {
	b := newLeaseBook(rules(), hello("i1"), "")
	out := b.onHello(hello("i1"), bookStart, "s1", func(ulid.ULID, int) (ulid.ULID, bool) { return ulid.ULID{}, false })
	var w *protocol.Welcome
	for _, e := range out {
		if r, ok := e.(reply); ok {
			w = r.msg.(*protocol.Welcome)
		}
	}
	if w == nil || w.Nonce != "c-i1" || !protocol.CheckWelcomeProof(bookKey, "n1", w) || w.InternalURL != "http://coordinator/files/" ||
		w.HeartbeatInterval != time.Second || w.Lease != 5*time.Second {
		t.Fatalf("welcome %+v", w)
	}
}
