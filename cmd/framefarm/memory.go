package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memoryReleaser hands back to the operating system the heap a burst left free. Go collects
// garbage only as it allocates, so once a burst ends (a campaign's intake, a mass cancel, a
// listing storm) a quiet coordinator keeps the burst's high-water heap resident until the
// runtime's forced collection minutes later. Every Interval, when the heap holds more than
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
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
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
	}
}
