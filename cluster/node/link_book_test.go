package node

import (
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// The link book's rules, without an actor, a network or a clock: each test drives one book
// through events at made-up times.

var (
	linkStart   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	linkKey     = []byte("link-key-0123456789")
	coordinator = sender{remote: true, peer: protocol.Peer{Addr: "10.0.0.1:7947", Verified: true,
		Identity: certs.Identity{Role: certs.RoleCoordinator, Fingerprint: "aa"}}}
)

func newTestBook() *linkBook {
	return newLinkBook(protocol.Hello{NodeID: "n1", Incarnation: "i1", AgentAddress: "10.0.0.2:7947", AgentID: "framefarm-agent", Slots: 1}, linkKey)
}

// welcomeOf is the welcome a coordinator holding the key gives the hello answering nonce.
func welcomeOf(nonce, session string, seq uint64) *protocol.Welcome {
	return &protocol.Welcome{Accepted: true, Session: session, Nonce: nonce, Proof: protocol.WelcomeProof(linkKey, nonce, "n1", session),
		HeartbeatInterval: 2 * time.Second, Seq: seq, InternalURL: "http://10.0.0.1:8080/files/"}
}

// join takes the book through a hello, a challenge and a welcome.
func join(t *testing.T, b *linkBook, now time.Time, session string) {
	t.Helper()
	b.tick(now, nil)
	if h := b.onChallenge(&protocol.Challenge{Nonce: "c-" + session}, coordinator, now, nil); h == nil {
		t.Fatal("the challenge was not answered")
	}
	if got := b.onWelcome(welcomeOf("c-"+session, session, 0), coordinator); got != welcomeAccepted {
		t.Fatalf("welcome: %v", got)
	}
}

func TestLinkBookSaysHelloOnceInItsPatience(t *testing.T) {
	b := newTestBook()
	sent := b.tick(linkStart, []protocol.AttemptStatus{{JobID: "J1", Attempt: 2, Percent: 40}})
	h, ok := sent[0].(*protocol.Hello)
	if len(sent) != 1 || !ok || h.Nonce != "" || h.KeyProof != "" || len(h.Running) != 1 {
		t.Fatalf("first tick sent %+v", sent)
	}
	if sent := b.tick(linkStart.Add(500*time.Millisecond), nil); len(sent) != 0 {
		t.Fatalf("a second hello within its patience: %+v", sent)
	}
	if sent := b.tick(linkStart.Add(time.Second), nil); len(sent) != 1 {
		t.Fatalf("no hello after its patience: %+v", sent)
	}
}

func TestLinkBookAnswersOnlyTheChallengeItAskedFor(t *testing.T) {
	b := newTestBook()
	if h := b.onChallenge(&protocol.Challenge{Nonce: "c1"}, coordinator, linkStart, nil); h != nil {
		t.Fatal("answered a challenge before saying hello")
	}
	b.tick(linkStart, nil)
	node := sender{remote: true, peer: protocol.Peer{Verified: true, Identity: certs.Identity{Role: certs.RoleNode, Fingerprint: "bb"}}}
	if h := b.onChallenge(&protocol.Challenge{Nonce: "c1"}, node, linkStart, nil); h != nil {
		t.Fatal("answered a node's challenge")
	}
	h := b.onChallenge(&protocol.Challenge{Nonce: "c1"}, coordinator, linkStart, nil)
	if h == nil || h.Nonce != "c1" || !protocol.CheckHelloProof(linkKey, h) || h.AgentAddress != "10.0.0.2:7947" {
		t.Fatalf("answer %+v", h)
	}
	if again := b.onChallenge(&protocol.Challenge{Nonce: "c2"}, coordinator, linkStart, nil); again != nil {
		t.Fatal("answered a second challenge for one hello")
	}
}

func TestLinkBookTakesOnlyTheWelcomeOfItsHello(t *testing.T) {
	b := newTestBook()
	b.tick(linkStart, nil)
	b.onChallenge(&protocol.Challenge{Nonce: "c1"}, coordinator, linkStart, nil)
	forged := welcomeOf("c1", "s1", 0)
	forged.Proof = protocol.WelcomeProof([]byte("another key 123456"), "c1", "n1", "s1")
	for name, w := range map[string]*protocol.Welcome{
		"another hello's": welcomeOf("c0", "s1", 0),
		"without the key": forged,
	} {
		if got := b.onWelcome(w, coordinator); got != welcomeIgnored {
			t.Errorf("%s welcome: %v", name, got)
		}
	}
	if got := b.onWelcome(&protocol.Welcome{Nonce: "c1", Reason: "bad id"}, coordinator); got != welcomeRefused || b.welcomed {
		t.Fatalf("refusal: %v", got)
	}
	if got := b.onWelcome(welcomeOf("c1", "s1", 7), coordinator); got != welcomeAccepted || b.session != "s1" || b.seq != 7 || b.interval != 2*time.Second {
		t.Fatalf("welcome: %v, session %q seq %d", got, b.session, b.seq)
	}
	if got := b.onWelcome(welcomeOf("c1", "s2", 0), coordinator); got != welcomeIgnored || b.session != "s1" {
		t.Fatal("a second welcome replaced the first")
	}
}

func TestLinkBookTakesWorkOnlyFromItsWelcomer(t *testing.T) {
	b := newTestBook()
	if b.fromWelcomer("", sender{}) {
		t.Fatal("took work before a welcome")
	}
	join(t, b, linkStart, "s1")
	other := coordinator
	other.peer.Identity.Fingerprint = "cc"
	for name, ok := range map[string]bool{
		"its welcomer":          b.fromWelcomer("s1", coordinator),
		"another session":       !b.fromWelcomer("s0", coordinator),
		"no session":            !b.fromWelcomer("", coordinator),
		"another certificate":   !b.fromWelcomer("s1", other),
		"this process":          !b.fromWelcomer("s1", sender{}),
		"without a certificate": !b.fromWelcomer("s1", sender{remote: true, peer: protocol.Peer{Addr: "x"}}),
	} {
		if !ok {
			t.Errorf("%s: wrong", name)
		}
	}
}

func TestLinkBookBeatsAndResendsUntilAcknowledged(t *testing.T) {
	b := newTestBook()
	b.afterCrash([]attemptKey{{"J0", 3}})
	join(t, b, linkStart, "s1")
	b.onAssigned(4)
	b.finished(attemptKey{"J2", 1}, &protocol.Done{JobID: "J2", Attempt: 1})
	sent := b.tick(linkStart.Add(time.Second), []protocol.AttemptStatus{{JobID: "J1", Attempt: 1, Percent: 50}})
	if len(sent) != 3 {
		t.Fatalf("sent %+v", sent)
	}
	hb := sent[0].(*protocol.Heartbeat)
	if hb.Session != "s1" || hb.Seq != 4 || len(hb.Running) != 3 || hb.Running[0].JobID != "J0" || hb.Running[0].Percent != 100 {
		t.Fatalf("heartbeat %+v", hb)
	}
	lost, done := sent[1].(*protocol.Failed), sent[2].(*protocol.Done)
	if lost.JobID != "J0" || !lost.Retryable || lost.Session != "s1" || done.JobID != "J2" || done.Session != "s1" {
		t.Fatalf("results %+v %+v", lost, done)
	}
	if _, ok := b.onFinalAck(&protocol.FinalAck{Session: "s0", JobID: "J2", Attempt: 1}, coordinator); ok {
		t.Fatal("an ack of another session was taken")
	}
	if k, ok := b.onFinalAck(&protocol.FinalAck{Session: "s1", JobID: "J2", Attempt: 1}, coordinator); !ok || k.jobID != "J2" {
		t.Fatal("the ack was not taken")
	}
	if !b.dropFinal(attemptKey{"J0", 3}) || len(b.tick(linkStart.Add(2*time.Second), nil)) != 1 {
		t.Fatal("results remain after their ack and abandon")
	}
}

func TestLinkBookSaysHelloAgainWhenUnknown(t *testing.T) {
	b := newTestBook()
	join(t, b, linkStart, "s1")
	rehello, abandon := b.onHeartbeatAck(&protocol.HeartbeatAck{Known: true, Abandon: []protocol.Abandon{
		{Session: "s1", JobID: "J1", Attempt: 1}, {Session: "s0", JobID: "J2", Attempt: 1}}}, coordinator)
	if rehello || len(abandon) != 1 || abandon[0].JobID != "J1" {
		t.Fatalf("abandon %+v", abandon)
	}
	if rehello, _ := b.onHeartbeatAck(&protocol.HeartbeatAck{}, sender{}); rehello {
		t.Fatal("someone else's answer made the node say hello")
	}
	if rehello, _ := b.onHeartbeatAck(&protocol.HeartbeatAck{}, coordinator); !rehello {
		t.Fatal("an unknown answer did not make the node say hello")
	}
	if sent := b.tick(linkStart.Add(time.Millisecond), nil); len(sent) != 1 || sent[0].(*protocol.Hello).Nonce != "" {
		t.Fatalf("after the answer: %+v", sent)
	}
}
