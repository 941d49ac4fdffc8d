package api

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

type fixedFarm struct {
	stats actors.QueueStats
	caps  map[string]actors.Capacity
}

func (f fixedFarm) QueueStats() (actors.QueueStats, error) { return f.stats, nil }
func (f fixedFarm) Capacities() map[string]actors.Capacity { return f.caps }

// TestFarmHistoryKeepsAnHourByTheMinute: counts and percentiles land in their minute, samples
// show the queue and slots, and minutes older than an hour are forgotten.
func TestFarmHistoryKeepsAnHourByTheMinute(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 30, 0, time.UTC)
	clk := clock.NewFake(start)
	h := &FarmHistory{Clock: clk, Source: fixedFarm{
		stats: actors.QueueStats{Depth: map[string]int{"lottie": 5, "ae2026": 2}, OldestQueued: start.Add(-90 * time.Second)},
		caps:  map[string]actors.Capacity{"lottie": {Slots: 4, Free: 1}, "ffmpeg": {Slots: 4, Free: 1}},
	}}
	ev := &actors.Events{}
	h.Watch(ev)
	changed := func(from, to persistence.JobState) {
		ev.JobStateChanged.Publish(actors.JobStateChanged{Job: ulid.ULID{}, From: from, To: to})
	}
	for i := 1; i <= 100; i++ {
		ev.RenderFinished.Publish(actors.RenderFinished{Engine: "lottie", Took: time.Duration(i) * time.Second})
		changed(persistence.JobRendering, persistence.JobFinished)
	}
	changed(persistence.JobRendering, persistence.JobFailed)
	changed(persistence.JobQueued, persistence.JobRendering) // not counted
	h.Sample()
	clk.Advance(time.Minute)
	changed(persistence.JobRendering, persistence.JobFailed)

	minutes := h.Minutes()
	if len(minutes) != historyMinutes {
		t.Fatalf("%d minutes", len(minutes))
	}
	last, before := minutes[historyMinutes-1], minutes[historyMinutes-2]
	if !last.At.Equal(start.Add(time.Minute).Truncate(time.Minute)) || last.Failed != 1 || last.Finished != 0 || last.Queued != nil {
		t.Fatalf("this minute %+v", last)
	}
	if before.Finished != 100 || before.Failed != 1 || *before.Queued != 7 || *before.OldestQueuedSeconds != 90 ||
		*before.SlotsBusy != 3 || *before.Slots != 4 || *before.RenderP50 != 51 || *before.RenderP90 != 91 || *before.RenderP99 != 100 {
		t.Fatalf("the minute before %+v (p50 %v p90 %v p99 %v)", before, *before.RenderP50, *before.RenderP90, *before.RenderP99)
	}
	clk.Advance(time.Hour)
	for _, m := range h.Minutes() {
		if m.Finished != 0 || m.Failed != 0 {
			t.Fatalf("an hour later, %+v is still kept", m)
		}
	}
}
