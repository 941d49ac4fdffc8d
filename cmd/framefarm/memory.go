package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memoryReleaser hands back to the operating system the heap a burst left free. Go collects
// garbage only as it allocates, so once a burst ends (a campaign's intake, a mass cancel, a
// listing storm) a quiet coordinator keeps the burst's high-water heap resident until the
// runtime's forced collection minutes later. At once (it starts after the restore of the queue,
// a burst of its own) and every Interval after, when the heap holds more than
// Threshold bytes beyond what the last collection found live (garbage not collected yet, or
// free memory not yet returned), it collects and releases them: at most one extra collection per
// interval under load (where collections run many times a second anyway), and a resident size
// that follows the live heap when quiet.
type memoryReleaser struct {
	Interval  time.Duration
	Threshold uint64
}

// Run releases until ctx ends.
func (m memoryReleaser) Run(ctx context.Context) {
	ticker := time.NewTicker(m.Interval)
	defer ticker.Stop()
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	for {
		metrics.Read(samples)
		var v [4]uint64
		for i, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				v[i] = s.Value.Uint64()
			}
		}
		if held := v[1] + v[2] + v[3]; held > v[0]+m.Threshold {
			debug.FreeOSMemory()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// gcTuner keeps at least Headroom bytes of growth between collections. A coordinator's live heap
// is small (jobs live in the store), so the default GOGC=100 collects every few megabytes
// allocated: under intake, about 25 collections a second took a fifth of the CPU. A collection
// costs what is live, not what it frees, so a fixed headroom buys far fewer collections for a
// bounded amount of memory; above Headroom of live heap it changes nothing. A GOGC set in the
// environment is the operator's choice, and the tuner then does nothing.
type gcTuner struct {
	Interval time.Duration
	Headroom uint64
}

// gcPercentFor is the GOGC that lets a heap of live bytes grow by headroom before the next
// collection: never below Go's default of 100, and at most 1000.
func gcPercentFor(live, headroom uint64) int {
	if live == 0 {
		return 1000
	}
	return int(min(max(headroom*100/live, 100), 1000))
}

// Run tunes until ctx ends, and then leaves Go's default in place.
func (g gcTuner) Run(ctx context.Context) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	defer debug.SetGCPercent(100)
	ticker := time.NewTicker(g.Interval)
	defer ticker.Stop()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for {
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 {
			debug.SetGCPercent(gcPercentFor(live[0].Value.Uint64(), g.Headroom))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
