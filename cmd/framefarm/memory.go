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
// runtime's forced collection minutes later. It looks at once (it starts after the restore of the
// queue, a burst of its own) and every Interval after. Once no collection of the runtime's own
// ran since its last look (nothing is allocating), it collects and releases whenever the heap
// holds more than QuietThreshold bytes beyond what the last collection found live (garbage not
// collected yet, or free memory not yet returned): that costs one collection and nothing waits
// for it. While collections run, only beyond Threshold, and at most once per BusyGap (a
// collection forced under load costs the intake; there they run many times a second anyway). A
// resident size that follows the live heap when quiet.
type memoryReleaser struct {
	Interval       time.Duration
	QuietThreshold uint64
	Threshold      uint64
	BusyGap        time.Duration
}

// releaseDue says whether to collect and release: held is what the heap holds, live what the
// last collection found live, quiet whether no collection of the runtime's own ran since the
// last look, since how long ago the last release was.
func (m memoryReleaser) releaseDue(held, live uint64, quiet bool, since time.Duration) bool {
	if quiet {
		return held > live+m.QuietThreshold
	}
	return held > live+m.Threshold && since >= m.BusyGap
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
		{Name: "/gc/cycles/automatic:gc-cycles"},
	}
	lastCycles := ^uint64(0) // the first look is never quiet
	var lastRelease time.Time
	for {
		metrics.Read(samples)
		var v [5]uint64
		for i, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				v[i] = s.Value.Uint64()
			}
		}
		if m.releaseDue(v[1]+v[2]+v[3], v[0], v[4] == lastCycles, time.Since(lastRelease)) {
			debug.FreeOSMemory()
			lastRelease = time.Now()
		}
		lastCycles = v[4]
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// gcTuner keeps at least Headroom bytes of growth between collections. A coordinator's live heap
// is small (jobs live in the store), so the default GOGC=100 collects every few megabytes
// allocated, many times a second under intake (the README's "Memory" paragraph). A collection
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
