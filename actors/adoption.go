package actors

import (
	"sync"

	"github.com/oklog/ulid/v2"
)

// adoptionBook holds, after a coordinator restart, the attempts that were rendering when the
// previous process stopped. A node that reconnects and still holds one of them adopts it: the
// render goes on under its attempt number instead of starting again. What no node claims within
// a lease is queued again (jobActor.awaitAdoption).
type adoptionBook struct {
	mu      sync.Mutex
	pending map[ulid.ULID]adoptable
}

type adoptable struct {
	attempt int
	node    string
	team    ulid.ULID
}

func newAdoptionBook() *adoptionBook {
	return &adoptionBook{pending: make(map[ulid.ULID]adoptable)}
}

func (b *adoptionBook) offer(jobID ulid.ULID, a adoptable) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending[jobID] = a
}

// claim takes the attempt for the node that rendered it; false when it is not waiting for that
// node (adopted already, expired, or another attempt).
func (b *adoptionBook) claim(jobID ulid.ULID, attempt int, node string) (adoptable, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.pending[jobID]
	if !ok || a.attempt != attempt || (node != "" && a.node != node) {
		return adoptable{}, false
	}
	delete(b.pending, jobID)
	return a, true
}

// claimer is claim for one node, as the lease book takes it.
func (b *adoptionBook) claimer(node string) func(jobID ulid.ULID, attempt int) (ulid.ULID, bool) {
	return func(jobID ulid.ULID, attempt int) (ulid.ULID, bool) {
		a, ok := b.claim(jobID, attempt, node)
		return a.team, ok
	}
}
