package actors

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// waitBook is the scheduler's account of why queued jobs cannot start, per subject: an engine
// (no ready node offers it), a team (at its maxRunning; teamSubject), a pool's engine (no ready
// node of the pool offers it), a limit (every render of it in use). It holds the reason last
// recorded per subject (persistence.RecordWaits; a job's log shows the reasons of its subjects
// that held while it waited), and the subjects whose reason may have changed since. A change is
// recorded once, whatever the number of jobs waiting.
type waitBook struct {
	recorded map[string]string
	dirty    map[string]bool
	// out publishes the reasons recorded, for views outside the actor (nil: none).
	out *waitSnapshot
	// judging is false until render nodes had the adopt window to come back after a start: a
	// restart would otherwise record, for a moment, that no node offers anything.
	judging bool
}

func newWaitBook(recorded map[string]string, out *waitSnapshot) *waitBook {
	if recorded == nil {
		recorded = map[string]string{}
	}
	b := &waitBook{recorded: recorded, dirty: map[string]bool{}, out: out}
	b.publish()
	return b
}

// waitSnapshot holds the reasons recorded, as last published: subjects whose jobs cannot
// start only.
type waitSnapshot = atomic.Pointer[map[string]string]

func (b *waitBook) publish() {
	if b.out == nil {
		return
	}
	out := make(map[string]string, len(b.recorded))
	for subject, reason := range b.recorded {
		if reason != "" {
			out[subject] = reason
		}
	}
	b.out.Store(&out)
}

// WaitReasons returns why each subject's queued jobs cannot start (an engine, a pool's engine:
// persistence.PoolWaitSubject, a team, a limit), as the scheduler last recorded it.
func (c *Coordinator) WaitReasons() map[string]string {
	return lastPublished(c, func(t *term) *waitSnapshot { return &t.waits })
}

// touch notes that a subject's reason may have changed: a node offering an engine joined,
// paused or left, an engine's or a team's first job queued, a capped team took or gave back a
// slot. Other slots taken and freed change no reason, and touch nothing.
func (b *waitBook) touch(subjects ...string) {
	for _, e := range subjects {
		b.dirty[e] = true
	}
}

// changes returns the touched subjects whose reason differs from the one recorded, taking the
// new reasons as recorded; reason says why a subject's jobs cannot start ("" when they can).
func (b *waitBook) changes(reason func(subject string) string) []persistence.WaitChange {
	if !b.judging || len(b.dirty) == 0 {
		return nil
	}
	var out []persistence.WaitChange
	for e := range b.dirty {
		if r := reason(e); r != b.recorded[e] {
			out = append(out, persistence.WaitChange{Subject: e, Reason: r})
			b.recorded[e] = r
		}
	}
	clear(b.dirty)
	slices.SortFunc(out, func(a, b persistence.WaitChange) int { return strings.Compare(a.Subject, b.Subject) })
	if len(out) > 0 {
		b.publish()
	}
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

// teamSubject is the subject of why a team's jobs wait.
func teamSubject(team ulid.ULID) string { return persistence.TeamWaitSubject(team) }

// waitReason says why a queued job of the subject cannot start, "" when nothing holds it.
func (s *scheduler) waitReason(subject string) string {
	if team, ok := persistence.WaitSubjectTeam(subject); ok {
		r := s.rulesFor(team)
		switch {
		case s.queuedBy[team] == 0:
			return ""
		case s.atCap(team):
			return CapWaitReason(s.holding[team], r.maxRunning)
		case r.pools != nil && !s.readyNodeFor(r):
			return fmt.Sprintf("the team renders only in pools %q (set by the farm's admin), and no ready render node is in one", *r.pools)
		}
		return ""
	}
	if reason, ok := s.placementWaitReason(subject); ok {
		return reason
	}
	return s.engineWaitReason(subject)
}

// CapWaitReason says why a job of a team whose renders hold running slots waits: its maxRunning.
func CapWaitReason(running, maxRunning int) string {
	return fmt.Sprintf("the team's renders hold %s, its maxRunning (%d)", renderer.Count(running, "render slot"), maxRunning)
}

// readyNodeFor reports whether a ready node may render the jobs of a team of these rules.
func (s *scheduler) readyNodeFor(r teamRules) bool {
	for _, n := range s.nodes {
		if n.paused == "" && r.mayRenderOn(n) {
			return true
		}
	}
	return false
}

// pausedNodes says what the nodes a job could render on are doing when none is ready ("the
// only render node offering the "lottie" engine is draining", "every render node ... is
// draining (2) or quarantined (1)"), "" when there are none: of renders, the nodes offering
// the engine, of nodes, those the job may use besides.
func (s *scheduler) pausedNodes(of string, engine string, may func(*schedNode) bool) string {
	counts := map[NodeState]int{}
	total := 0
	for _, n := range s.nodes {
		if n.paused != "" && slices.Contains(n.engines, engine) && may(n) {
			counts[n.paused]++
			total++
		}
	}
	if total == 0 {
		return ""
	}
	var doing []string
	for _, state := range NodeStates {
		if c := counts[state]; c > 0 {
			text := map[NodeState]string{NodeSuspect: "out of reach", NodeTesting: "testing itself"}[state]
			if text == "" {
				text = string(state)
			}
			if total > 1 {
				text += fmt.Sprintf(" (%d)", c)
			}
			doing = append(doing, text)
		}
	}
	if total == 1 {
		return fmt.Sprintf("the only %s offering the %q engine is %s", of, engine, doing[0])
	}
	if len(doing) > 1 {
		doing = append(doing[:len(doing)-2], doing[len(doing)-2]+" or "+doing[len(doing)-1])
	}
	return fmt.Sprintf("every %s offering the %q engine is %s", of, engine, strings.Join(doing, ", "))
}

// engineWaitReason says why a queued job of the engine cannot start, "" when a ready node
// offers it.
func (s *scheduler) engineWaitReason(engine string) string {
	if s.capacity[engine].Nodes > 0 {
		return ""
	}
	if paused := s.pausedNodes("render node", engine, func(*schedNode) bool { return true }); paused != "" {
		return paused
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
