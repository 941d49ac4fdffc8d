package node

import (
	"sort"
	"time"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// linkBook is every rule of the node's side of its link to the coordinator, with no I/O of its
// own: when to say hello and how to answer a challenge, which welcome to take and from whom to
// take work, what each heartbeat says, which results to send again, and which attempts a crash
// left to report. The agent feeds it events under its lock and does what it returns
// (link_book_test.go tests the rules without a network or a clock).
type linkBook struct {
	// base is the node's hello without the parts that change (held attempts, draining, nonce).
	base protocol.Hello
	key  []byte

	welcomed bool
	// helloAt is when the unanswered hello was sent (zero: none is); nonce is the challenge it
	// answers ("" while the node waits for one).
	helloAt time.Time
	nonce   string
	// session is the token of the coordinator's last welcome, carried by every message after it
	// in either direction; welcomedBy is who sent that welcome, the only sender whose work the
	// node takes; internalURL is where the coordinator's own files are.
	session     string
	welcomedBy  sender
	internalURL string
	// interval is how often to beat, as the coordinator asked.
	interval time.Duration
	// seq is the highest assignment number seen, counted on from the welcome's.
	seq      uint64
	draining bool
	// finals are results the coordinator has not acknowledged yet.
	finals map[attemptKey]any
}

// sender is who sent a message to the agent: a process of the farm (remote), or this one.
type sender struct {
	peer   protocol.Peer
	remote bool
}

// sameAs reports whether two messages came from the same coordinator: both from this process,
// or both over the network from the holder of one certificate (without TLS, the session alone
// tells).
func (s sender) sameAs(o sender) bool {
	if s.remote != o.remote || s.peer.Verified != o.peer.Verified {
		return false
	}
	return !s.peer.Verified || s.peer.Identity.Fingerprint == o.peer.Identity.Fingerprint
}

// mayBeCoordinator reports whether a sender may be the coordinator: this process, a peer whose
// certificate names the coordinator, or, without TLS, anyone (the key proofs then tell).
func (s sender) mayBeCoordinator() bool {
	return !s.remote || !s.peer.Verified || s.peer.Identity.Role == certs.RoleCoordinator
}

func (s sender) describe() string {
	if !s.remote {
		return "this process"
	}
	return s.peer.Describe()
}

func newLinkBook(base protocol.Hello, key []byte) *linkBook {
	return &linkBook{base: base, key: key, interval: time.Second, finals: make(map[attemptKey]any)}
}

// afterCrash turns the attempts a crashed run of the node held (their markers) into lost-attempt
// reports, sent once the coordinator is reached.
func (b *linkBook) afterCrash(keys []attemptKey) {
	for _, k := range keys {
		b.finals[k] = &protocol.Failed{JobID: k.jobID, Attempt: k.attempt, Retryable: true, Fault: protocol.FaultNode,
			Error: "the render node restarted during the render"}
	}
}

// reset forgets the welcome: the coordinator moved, restarted, or does not know the node.
func (b *linkBook) reset() {
	b.welcomed, b.helloAt, b.nonce = false, time.Time{}, ""
}

// patience is how long an unanswered hello may still be answered.
func (b *linkBook) patience() time.Duration { return max(b.interval, time.Second) }

// tick says what to send the coordinator now. Unwelcomed: a hello asking for a challenge,
// unless one sent less than patience ago may still be answered (one welcome is enough).
// Welcomed: a heartbeat listing what the node holds, and every unacknowledged result.
func (b *linkBook) tick(now time.Time, running []protocol.AttemptStatus) []any {
	if !b.welcomed {
		if !b.helloAt.IsZero() && now.Sub(b.helloAt) < b.patience() {
			return nil
		}
		b.helloAt, b.nonce = now, ""
		return []any{b.hello(running)}
	}
	out := []any{b.stamp(&protocol.Heartbeat{Incarnation: b.base.Incarnation, Seq: b.seq, Running: b.held(running)})}
	keys := make([]attemptKey, 0, len(b.finals))
	for k := range b.finals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, k int) bool { return keys[i].less(keys[k]) })
	for _, k := range keys {
		out = append(out, b.stamp(b.finals[k]))
	}
	return out
}

// hello is the node's hello as of now, without a nonce.
func (b *linkBook) hello(running []protocol.AttemptStatus) *protocol.Hello {
	h := b.base
	h.Running, h.Draining = b.held(running), b.draining
	return &h
}

// held lists the attempts the node renders or holds an unacknowledged result of.
func (b *linkBook) held(running []protocol.AttemptStatus) []protocol.AttemptStatus {
	out := append([]protocol.AttemptStatus{}, running...)
	for k := range b.finals {
		out = append(out, protocol.AttemptStatus{JobID: k.jobID, Attempt: k.attempt, Percent: 100})
	}
	sort.Slice(out, func(i, k int) bool {
		return attemptKey{out[i].JobID, out[i].Attempt}.less(attemptKey{out[k].JobID, out[k].Attempt})
	})
	return out
}

// onChallenge answers the coordinator's challenge with a hello proving the cluster key, or
// returns nil for a challenge the node did not ask for (it is welcomed, or says no hello).
func (b *linkBook) onChallenge(c *protocol.Challenge, from sender, now time.Time, running []protocol.AttemptStatus) *protocol.Hello {
	if b.welcomed || b.helloAt.IsZero() || b.nonce != "" || c.Nonce == "" || !from.mayBeCoordinator() {
		return nil
	}
	b.nonce, b.helloAt = c.Nonce, now
	h := b.hello(running)
	h.Nonce = c.Nonce
	h.KeyProof = protocol.HelloProof(b.key, c.Nonce, h)
	return h
}

// welcomeOutcome is what a welcome did.
type welcomeOutcome int

const (
	welcomeIgnored  welcomeOutcome = iota // it answers no hello of the node, or proves no key
	welcomeRefused                        // the coordinator refused the node (Reason says why)
	welcomeAccepted                       // the node is welcomed
)

// onWelcome takes the coordinator's answer to the hello the node sent last: it must echo that
// hello's challenge and prove the coordinator holds the cluster key. A refusal changes nothing,
// so it needs no proof (a node with the wrong key could not check one).
func (b *linkBook) onWelcome(w *protocol.Welcome, from sender) welcomeOutcome {
	current := !b.welcomed && b.nonce != "" && w.Nonce == b.nonce && from.mayBeCoordinator()
	switch {
	case current && !w.Accepted:
		return welcomeRefused
	case !current || !protocol.CheckWelcomeProof(b.key, b.base.NodeID, w):
		return welcomeIgnored
	}
	b.welcomed, b.session, b.welcomedBy, b.internalURL = true, w.Session, from, w.InternalURL
	b.nonce = ""
	b.interval = w.HeartbeatInterval
	// The count goes on from the welcome's: assignments sent before it were handled before it.
	// A coordinator that restarted counts from 0, so the node's count from before is dropped.
	b.seq = w.Seq
	return welcomeAccepted
}

// fromWelcomer reports whether a message may be taken: it comes from the coordinator that
// welcomed the node, under the session of that welcome.
func (b *linkBook) fromWelcomer(session string, from sender) bool {
	return b.welcomed && session != "" && session == b.session && from.sameAs(b.welcomedBy)
}

// onAssigned counts an assignment the node took.
func (b *linkBook) onAssigned(seq uint64) { b.seq = max(b.seq, seq) }

// onHeartbeatAck takes the answer to a heartbeat: Known false makes the node say hello again;
// otherwise the attempts to abandon.
func (b *linkBook) onHeartbeatAck(ack *protocol.HeartbeatAck, from sender) (rehello bool, abandon []protocol.Abandon) {
	if !b.welcomed || !from.sameAs(b.welcomedBy) {
		return false, nil
	}
	if !ack.Known {
		b.reset()
		return true, nil
	}
	for _, a := range ack.Abandon {
		if a.Session == b.session {
			abandon = append(abandon, a)
		}
	}
	return false, abandon
}

// finished records an attempt's result, to be sent until acknowledged.
func (b *linkBook) finished(k attemptKey, final any) { b.finals[k] = final }

// onFinalAck forgets a result the coordinator made durable; false when the ack is not the
// welcomer's or names no result held.
func (b *linkBook) onFinalAck(ack *protocol.FinalAck, from sender) (attemptKey, bool) {
	k := attemptKey{ack.JobID, ack.Attempt}
	if _, held := b.finals[k]; !held || !b.fromWelcomer(ack.Session, from) {
		return k, false
	}
	delete(b.finals, k)
	return k, true
}

// dropFinal forgets a result of an abandoned attempt unsent: the coordinator would reject it.
func (b *linkBook) dropFinal(k attemptKey) bool {
	_, held := b.finals[k]
	delete(b.finals, k)
	return held
}

// stamp fills in who a message comes from: this node, under its current session.
func (b *linkBook) stamp(msg any) any {
	if m, ok := msg.(protocol.FromNode); ok {
		*m.From() = protocol.Sender{NodeID: b.base.NodeID, Session: b.session}
	}
	return msg
}
