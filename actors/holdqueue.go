package actors

import "github.com/asynkron/protoactor-go/actor"

// holdQueue keeps the messages an actor receives while it waits for its own write (or another
// step it must finish first), and replays them in arrival order once it is free.
type holdQueue struct {
	busy    bool
	waiting []heldMessage
}

type heldMessage struct {
	msg    any
	sender *actor.PID
}

// hold keeps msg for later if the actor is busy, and reports whether it did.
func (q *holdQueue) hold(msg any, sender *actor.PID) bool {
	if q.busy {
		q.waiting = append(q.waiting, heldMessage{msg, sender})
	}
	return q.busy
}

// release marks the actor free and replays held messages until one makes it busy again.
func (q *holdQueue) release(handle func(msg any, sender *actor.PID)) {
	q.busy = false
	for !q.busy && len(q.waiting) > 0 {
		m := q.waiting[0]
		q.waiting = q.waiting[1:]
		handle(m.msg, m.sender)
	}
}
