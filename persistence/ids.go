package persistence

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// IDs hands out ULIDs that strictly increase within the process, even when two are made in the
// same millisecond or the clock steps back, so id order is creation order.
//
// At most maxIDsPerMs ids share a millisecond: a burst (a batch of a thousand jobs takes its ids
// in a few microseconds) borrows the milliseconds that follow. The job counters by creation time
// end at the millisecond, and a listing reads the jobs of one millisecond to find a rank inside
// it; the cap keeps that read small. A job's creation time, which its id carries, then runs
// ahead of the clock by a millisecond per 64 jobs of a burst, and the clock catches up as soon
// as intake falls below 64,000 jobs a second.
type IDs struct {
	mu      sync.Mutex
	lastMs  uint64
	inLast  int // ids stamped lastMs so far
	entropy *ulid.MonotonicEntropy
}

const maxIDsPerMs = 64

// NewIDs returns a ULID source.
func NewIDs() *IDs {
	return &IDs{entropy: ulid.Monotonic(rand.Reader, 0)}
}

// New returns a fresh ULID stamped with t (or the last stamp used, if t is earlier).
func (g *IDs) New(t time.Time) ulid.ULID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next(t)
}

// Run calls fn with a source of ids stamped with t that no other caller's ids come between: the
// records of one request then sit side by side in every index, and a write appends to the end of
// an index page rather than shifting what a concurrent request put there.
func (g *IDs) Run(t time.Time, fn func(next func() ulid.ULID)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(func() ulid.ULID { return g.next(t) })
}

func (g *IDs) next(t time.Time) ulid.ULID {
	ms := ulid.Timestamp(t)
	switch {
	case ms > g.lastMs:
		g.lastMs, g.inLast = ms, 1
	case g.inLast < maxIDsPerMs:
		g.inLast++
	default:
		g.lastMs, g.inLast = g.lastMs+1, 1
	}
	return ulid.MustNew(g.lastMs, g.entropy)
}

// ParseID reads a ULID in its canonical 26-character form.
func ParseID(s string) (ulid.ULID, bool) {
	u, err := ulid.ParseStrict(s)
	return u, err == nil
}
