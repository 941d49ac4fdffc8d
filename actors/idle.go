package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/clock"
)

// idleRule says when an actor has been idle long enough to stop: after a wait on the injected
// clock, at the end of which root tells it so.
type idleRule struct {
	clock clock.Clock
	after time.Duration
	root  *actor.RootContext
}

// idleTimer tells an actor that it has been idle for its rule's wait; every reset starts the
// wait again and voids the previous one.
type idleTimer struct {
	timer clock.Timer
	gen   int
}

// idleCheck is the message an idle timer sends.
type idleCheck struct{ gen int }

func (t *idleTimer) reset(rule idleRule, self *actor.PID) {
	t.stop()
	t.gen++
	gen := t.gen
	t.timer = rule.clock.AfterFunc(rule.after, func() { rule.root.Send(self, &idleCheck{gen: gen}) })
}

// current reports whether a check comes from the latest reset.
func (t *idleTimer) current(m *idleCheck) bool { return m.gen == t.gen }

func (t *idleTimer) stop() {
	if t.timer != nil {
		t.timer.Stop()
	}
}
