package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/clock"
)

// idleTimer tells an actor, on the injected clock, that it has been idle for
// Config.PassivateAfter; every reset starts the wait again and voids the previous one.
type idleTimer struct {
	timer clock.Timer
	gen   int
}

// idleCheck is the message an idle timer sends.
type idleCheck struct{ gen int }

func (t *idleTimer) reset(c *Coordinator, self *actor.PID) {
	t.stop()
	t.gen++
	gen := t.gen
	t.timer = c.Clock.AfterFunc(c.cfg.PassivateAfter, func() { c.system.Root.Send(self, &idleCheck{gen: gen}) })
}

// current reports whether a check comes from the latest reset.
func (t *idleTimer) current(m *idleCheck) bool { return m.gen == t.gen }

func (t *idleTimer) stop() {
	if t.timer != nil {
		t.timer.Stop()
	}
}
