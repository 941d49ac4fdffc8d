package api

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// historyMinutes is how far back the farm's history goes.
const historyMinutes = 60

// maxDurationSamples bounds the render durations a minute keeps for its percentiles (a uniform
// sample of them beyond).
const maxDurationSamples = 1024

// FarmSource is what the history samples every 15 s.
type FarmSource interface {
	QueueStats() (actors.QueueStats, error)
	Capacities() map[string]actors.Capacity
}

var _ FarmSource = (*actors.Coordinator)(nil)

// FarmHistory keeps the last hour of the farm in memory, minute by minute, for the dashboard's
// charts (no Prometheus needed): jobs finished and failed, render durations, and, sampled every
// 15 s (a minute keeps its last sample), the queue's depth and oldest job and the slots busy.
// It watches the actors by counting, which never blocks them.
type FarmHistory struct {
	Source FarmSource
	Clock  clock.Clock

	mu      sync.Mutex
	minutes [historyMinutes]minuteStats
}

type minuteStats struct {
	start            time.Time // the minute, truncated; zero when nothing was recorded
	finished, failed int
	durations        []float64
	seen             int // render durations seen, of which durations holds a sample
	queued, busy     int
	slots            int
	oldestAge        float64
	sampled          bool
}

// HistoryMinute is one minute of the farm's history.
type HistoryMinute struct {
	At       time.Time `json:"at"`
	Finished int       `json:"finished"`
	Failed   int       `json:"failed"`
	// Queued, OldestQueuedSeconds, SlotsBusy and Slots were sampled during the minute (null when
	// the coordinator was not running).
	Queued              *int     `json:"queued"`
	OldestQueuedSeconds *float64 `json:"oldestQueuedSeconds"`
	SlotsBusy           *int     `json:"slotsBusy"`
	Slots               *int     `json:"slots"`
	// Render durations of the renders that finished in the minute, in seconds.
	RenderP50 *float64 `json:"renderP50"`
	RenderP90 *float64 `json:"renderP90"`
	RenderP99 *float64 `json:"renderP99"`
}

// minute returns the slot of the minute t falls in, emptied when it held an older minute.
func (h *FarmHistory) minute(t time.Time) *minuteStats {
	start := t.Truncate(time.Minute)
	m := &h.minutes[start.Unix()/60%historyMinutes]
	if !m.start.Equal(start) {
		*m = minuteStats{start: start}
	}
	return m
}

// Watch subscribes the history to the jobs that end and the renders that finish.
func (h *FarmHistory) Watch(ev *actors.Events) {
	ev.JobStateChanged.Subscribe(h.jobStateChanged)
	ev.RenderFinished.Subscribe(h.renderFinished)
}

// jobStateChanged counts jobs finished and failed.
func (h *FarmHistory) jobStateChanged(e actors.JobStateChanged) {
	if e.Chunk || e.To != persistence.JobFinished && e.To != persistence.JobFailed {
		return
	}
	h.mu.Lock()
	m := h.minute(h.Clock.Now())
	if e.To == persistence.JobFinished {
		m.finished++
	} else {
		m.failed++
	}
	h.mu.Unlock()
}

// renderFinished keeps the render's duration for the minute's percentiles.
func (h *FarmHistory) renderFinished(e actors.RenderFinished) {
	h.mu.Lock()
	m := h.minute(h.Clock.Now())
	m.seen++
	switch {
	case len(m.durations) < maxDurationSamples:
		m.durations = append(m.durations, e.Took.Seconds())
	default:
		if i := rand.IntN(m.seen); i < maxDurationSamples {
			m.durations[i] = e.Took.Seconds() // reservoir sampling: every render equally likely kept
		}
	}
	h.mu.Unlock()
}

// Sample records the queue and the slots now.
func (h *FarmHistory) Sample() {
	stats, err := h.Source.QueueStats()
	if err != nil {
		return
	}
	caps := h.Source.Capacities()
	now := h.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.minute(now)
	m.queued, m.busy, m.slots, m.oldestAge, m.sampled = 0, 0, 0, 0, true
	for _, n := range stats.Depth {
		m.queued += n
	}
	if !stats.OldestQueued.IsZero() {
		m.oldestAge = now.Sub(stats.OldestQueued).Seconds()
	}
	// A node offers its slots to each engine it runs: count each node's slots once, under the
	// engine with the most.
	for _, c := range caps {
		if c.Slots > m.slots {
			m.slots, m.busy = c.Slots, c.Slots-c.Free
		}
	}
}

// Run samples every 15 s until ctx ends.
func (h *FarmHistory) Run(ctx context.Context) {
	tick, stop := ticks(h.Clock, 15*time.Second)
	defer stop()
	h.Sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			h.Sample()
		}
	}
}

// Minutes returns the last hour, oldest first, one entry per minute.
func (h *FarmHistory) Minutes() []HistoryMinute {
	now := h.Clock.Now().Truncate(time.Minute)
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HistoryMinute, 0, historyMinutes)
	for i := historyMinutes - 1; i >= 0; i-- {
		at := now.Add(-time.Duration(i) * time.Minute)
		entry := HistoryMinute{At: at.UTC()}
		if m := &h.minutes[at.Unix()/60%historyMinutes]; m.start.Equal(at) {
			entry.Finished, entry.Failed = m.finished, m.failed
			if m.sampled {
				queued, oldest, busy, slots := m.queued, m.oldestAge, m.busy, m.slots // copies: the ring changes after the lock
				entry.Queued, entry.OldestQueuedSeconds, entry.SlotsBusy, entry.Slots = &queued, &oldest, &busy, &slots
			}
			if len(m.durations) > 0 {
				sorted := slices.Sorted(slices.Values(m.durations))
				q := func(p float64) *float64 { v := sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]; return &v }
				entry.RenderP50, entry.RenderP90, entry.RenderP99 = q(0.5), q(0.9), q(0.99)
			}
		}
		out = append(out, entry)
	}
	return out
}

// farmHistory answers GET /api/v2/admin/history.
func (s *Server) farmHistory(r *request) {
	if s.History == nil {
		r.fail(newError(http.StatusNotFound, codeNotFound, "this server keeps no history"))
		return
	}
	s.History.Sample() // the current minute shows the farm as it is now
	r.json(http.StatusOK, map[string]any{"minutes": s.History.Minutes()})
}
