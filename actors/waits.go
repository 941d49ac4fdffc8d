package actors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/persistence"
)

// waitBook is the scheduler's account of why each engine's queued jobs cannot start: the reason
// last recorded per engine (persistence.RecordWaits; a job's log shows the reasons that held
// while it waited), and the engines whose reason may have changed since. A change is recorded
// once, whatever the number of jobs waiting.
type waitBook struct {
	recorded map[string]string
	dirty    map[string]bool
	// judging is false until render nodes had the adopt window to come back after a start: a
	// restart would otherwise record, for a moment, that no node offers anything.
	judging bool
}

func newWaitBook(recorded map[string]string) *waitBook {
	if recorded == nil {
		recorded = map[string]string{}
	}
	return &waitBook{recorded: recorded, dirty: map[string]bool{}}
}

// touch notes that an engine's reason may have changed: a node offering it joined, paused or
// left, or its first job queued. Slots taken and freed change no reason, and touch nothing.
func (b *waitBook) touch(engines ...string) {
	for _, e := range engines {
		b.dirty[e] = true
	}
}

// changes returns the touched engines whose reason differs from the one recorded, taking the
// new reasons as recorded; reason says why an engine's jobs cannot start ("" when they can).
func (b *waitBook) changes(reason func(engine string) string) []persistence.WaitChange {
	if !b.judging || len(b.dirty) == 0 {
		return nil
	}
	var out []persistence.WaitChange
	for e := range b.dirty {
		if r := reason(e); r != b.recorded[e] {
			out = append(out, persistence.WaitChange{Engine: e, Reason: r})
			b.recorded[e] = r
		}
	}
	clear(b.dirty)
	slices.SortFunc(out, func(a, b persistence.WaitChange) int { return strings.Compare(a.Engine, b.Engine) })
	return out
}

// startJudging begins judging, every engine known (recorded, or in engines) touched at once.
func (b *waitBook) startJudging(engines []string) {
	b.judging = true
	for e := range b.recorded {
		b.dirty[e] = true
	}
	b.touch(engines...)
}

// waitReason says why a queued job of the engine cannot start, "" when a ready node offers it.
func (s *scheduler) waitReason(engine string) string {
	if s.capacity[engine].Nodes > 0 {
		return ""
	}
	for _, n := range s.nodes {
		if slices.Contains(n.engines, engine) { // paused, or it would count as ready
			return fmt.Sprintf("every render node offering the %q engine is draining, quarantined or out of reach", engine)
		}
	}
	return fmt.Sprintf("no render node offers the %q engine", engine)
}

// recordWaits records the changes of reason since the last message.
func (s *scheduler) recordWaits() {
	changes := s.waits.changes(s.waitReason)
	if len(changes) == 0 {
		return
	}
	s.store.ApplyAsync(&persistence.RecordWaits{At: s.clock.Now(), Changes: changes}, func(err error) {
		if err != nil {
			s.log.Warn("cannot record why jobs wait", "err", err)
			return
		}
		s.events.WaitsRecorded.Publish(WaitsRecorded{Changes: changes})
	})
}
