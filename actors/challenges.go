package actors

import "time"

// challengeBook hands out the nonces a node's hello must answer (protocol.Challenge): each
// serves once, for challengeTTL, and only the peer it was given to, so a recorded hello cannot
// be played again. It holds at most maxChallenges (a farm's every node saying hello at once
// after a coordinator restart fits many times over, in a few MiB); the oldest go first.
type challengeBook struct {
	issued map[string]challenge
	// order lists the nonces oldest first (taken ones too, skipped when met).
	order []string
}

type challenge struct {
	peer    string
	expires time.Time
}

const (
	challengeTTL  = 30 * time.Second
	maxChallenges = 1 << 16
)

func newChallengeBook() *challengeBook { return &challengeBook{issued: make(map[string]challenge)} }

// issue makes a nonce for peer.
func (b *challengeBook) issue(peer string, now time.Time) string {
	for len(b.issued) >= maxChallenges || len(b.order) >= 2*maxChallenges {
		oldest := b.order[0]
		b.order = b.order[1:]
		delete(b.issued, oldest)
	}
	nonce := newToken()
	b.issued[nonce] = challenge{peer: peer, expires: now.Add(challengeTTL)}
	b.order = append(b.order, nonce)
	return nonce
}

// take spends a nonce: true when it was issued to peer, is unspent and has not expired.
func (b *challengeBook) take(nonce, peer string, now time.Time) bool {
	c, ok := b.issued[nonce]
	if !ok || c.peer != peer {
		return false // another peer's nonce stays its own
	}
	delete(b.issued, nonce)
	return now.Before(c.expires)
}
