package api

import (
	"sync"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// rateLimiter is a token bucket per API token: rate requests per second on average, bursts of up
// to burst.
type rateLimiter struct {
	rate, burst float64
	clock       clock.Clock
	mu          sync.Mutex
	buckets     map[[32]byte]*tokenBucket
}

type tokenBucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate, burst float64, clk clock.Clock) *rateLimiter {
	return &rateLimiter{rate: rate, burst: burst, clock: clk, buckets: make(map[[32]byte]*tokenBucket)}
}

// allow spends one request for key; when none is left it says how long until one is.
func (l *rateLimiter) allow(key [32]byte) (bool, time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		b = &tokenBucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}
