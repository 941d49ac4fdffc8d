package api

import (
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

func TestRateLimiterRefillsAtItsRate(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newRateLimiter(10, 3, clk)
	key, other := [32]byte{1}, [32]byte{2}
	for i := range 3 {
		if ok, _ := l.allow(key); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := l.allow(key)
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("past the burst: allowed %v, wait %v; want refused, 100ms", ok, wait)
	}
	if ok, _ := l.allow(other); !ok {
		t.Fatal("another token shares the budget")
	}
	clk.Advance(100 * time.Millisecond)
	if ok, _ := l.allow(key); !ok {
		t.Fatal("no refill after 1/rate")
	}
	if ok, _ := l.allow(key); ok {
		t.Fatal("refilled more than one request in 1/rate")
	}
	clk.Advance(time.Hour)
	for range 3 {
		l.allow(key)
	}
	if ok, _ := l.allow(key); ok {
		t.Fatal("the bucket grew past its burst")
	}
}
