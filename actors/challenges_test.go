package actors

import (
	"testing"
	"time"
)

// TestChallengesServeOnceTheirPeerWhileFresh: a nonce is good once, for the peer it was given
// to, until it expires; another peer cannot spend it; the book forgets the oldest when full.
func TestChallengesServeOnceTheirPeerWhileFresh(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := newChallengeBook()
	n := b.issue("cert:a", now)
	if b.take(n, "cert:b", now) {
		t.Fatal("another peer spent the nonce")
	}
	if !b.take(n, "cert:a", now.Add(time.Second)) {
		t.Fatal("its peer could not spend the nonce")
	}
	if b.take(n, "cert:a", now.Add(time.Second)) {
		t.Fatal("the nonce served twice")
	}
	late := b.issue("cert:a", now)
	if b.take(late, "cert:a", now.Add(challengeTTL)) {
		t.Fatal("an expired nonce served")
	}
	if b.take("invented", "cert:a", now) {
		t.Fatal("an invented nonce served")
	}
	first := b.issue("addr:x", now)
	for range maxChallenges {
		b.issue("addr:x", now)
	}
	if len(b.issued) > maxChallenges || b.take(first, "addr:x", now) {
		t.Fatalf("the full book holds %d and still the oldest", len(b.issued))
	}
	for range 3 * maxChallenges {
		b.take(b.issue("addr:y", now), "addr:y", now)
	}
	if len(b.order) > 2*maxChallenges {
		t.Fatalf("spent nonces pile up: %d", len(b.order))
	}
}
