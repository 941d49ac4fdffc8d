package actors

import (
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// Events carries what happens in the actors to those who watch it (metrics, the dashboard's
// event stream, the farm's history, the tests' signals): one type per happening, each on a
// topic of its own, so a watcher subscribes to the happenings it cares for and to nothing else.
//
// Subscriptions are made while the farm is wired, before the coordinator starts. Publishing calls
// each subscriber in turn on the publisher's goroutine (an actor's, or a write's completion), so
// a subscriber returns at once (counts, marks, records) and never waits on the actors.
type Events struct {
	JobStateChanged       Topic[JobStateChanged]
	JobActorStopped       Topic[JobActorStopped]
	JobProgressSaved      Topic[JobProgressSaved]
	RenderFinished        Topic[RenderFinished]
	StaleReport           Topic[StaleReport]
	JobRequeued           Topic[JobRequeued]
	Assigned              Topic[Assigned]
	JobsRemoved           Topic[JobsRemoved]
	TemplateStatusChanged Topic[TemplateStatusChanged]
	TemplateReinspected   Topic[TemplateReinspected]
	NodeStateChanged      Topic[NodeStateChanged]
	NodeRendered          Topic[NodeRendered]
	LeaseExpired          Topic[LeaseExpired]
	NodeMessageRefused    Topic[NodeMessageRefused]
	WebhookAttempted      Topic[WebhookAttempted]
	TokenRevoked          Topic[TokenRevoked]
	WaitsRecorded         Topic[WaitsRecorded]
	// DutiesChanged is published by a replica's shell, not by the actors: it began or ended a
	// term of leading, with or without the actors running.
	DutiesChanged Topic[DutiesChanged]
}

// Topic is one kind of happening and those who subscribed to it.
type Topic[E any] struct{ subscribers []func(E) }

// Subscribe calls f with every happening of the topic from now on. It is not safe to call once
// the coordinator runs: subscribe while wiring.
func (t *Topic[E]) Subscribe(f func(E)) { t.subscribers = append(t.subscribers, f) }

// Publish tells every subscriber of e. The actors publish; so do the tests of those who watch.
func (t *Topic[E]) Publish(e E) {
	for _, f := range t.subscribers {
		f(e)
	}
}

// publishJobEvent publishes what a job's book decided (published) on its topic.
func (e *Events) publishJobEvent(ev any) {
	switch ev := ev.(type) {
	case JobStateChanged:
		e.JobStateChanged.Publish(ev)
	case JobProgressSaved:
		e.JobProgressSaved.Publish(ev)
	case RenderFinished:
		e.RenderFinished.Publish(ev)
	case StaleReport:
		e.StaleReport.Publish(ev)
	case JobRequeued:
		e.JobRequeued.Publish(ev)
	}
}

// The happenings.
type (
	// JobStateChanged: a job's transition is durable; From is 0 for a job just created. Chunk
	// marks a split job's chunk, which counts, lists and charts of jobs leave out.
	JobStateChanged struct {
		Job      ulid.ULID
		From, To persistence.JobState
		Chunk    bool
	}
	// DutiesChanged: a replica took up the leader's duties for a raft Term (Leading), or
	// dropped them.
	DutiesChanged struct {
		Leading bool
		Term    uint64
	}
	// WaitsRecorded: changes of why engines' queued jobs cannot start are durable.
	WaitsRecorded struct{ Changes []persistence.WaitChange }
	// JobActorStopped: a job's actor passivated (its record stays in the store).
	JobActorStopped struct{ Job ulid.ULID }
	// JobProgressSaved: a rendering job's progress is durable.
	JobProgressSaved struct {
		Job     ulid.ULID
		Percent float64
	}
	// RenderFinished: a render ended with its output, after Took.
	RenderFinished struct {
		Engine string
		Took   time.Duration
	}
	// StaleReport: a node's report was rejected because its attempt is no longer current; What
	// is "progress", "done" or "failure".
	StaleReport struct {
		Job     ulid.ULID
		Attempt int
		What    string
	}
	// JobRequeued: a job whose attempt failed or was lost is queued again.
	JobRequeued struct{ Job ulid.ULID }
	// Assigned: an assignment was sent to a node after its job Waited in the queue.
	Assigned struct{ Waited time.Duration }
	// JobsRemoved: retention removed ended jobs (and Batches batches with their last job).
	JobsRemoved struct {
		Jobs    []*persistence.Job
		Batches int
	}
	// TemplateStatusChanged: a template's status is durable.
	TemplateStatusChanged struct {
		Team, Template ulid.ULID
		Status         persistence.TemplateStatus
	}
	// TemplateReinspected: an uploaded template was read again by a newer inspector, durably.
	TemplateReinspected struct{ Template ulid.ULID }
	// NodeStateChanged: a render node's new state; From is "" for a new node, To is "" for a
	// node an operator made the farm forget.
	NodeStateChanged struct {
		Node     string
		From, To NodeState
	}
	// NodeRendered: a render on Node ended, with its output (OK) or without.
	NodeRendered struct {
		Node string
		OK   bool
	}
	// LeaseExpired: a node was lost because its heartbeats stopped.
	LeaseExpired struct{ Node string }
	// NodeMessageRefused: a node's message could not be taken; Why is "payload" (it could not be
	// opened), "identity", "hello", "session" or "attempt" (a report of an attempt the node does
	// not hold).
	NodeMessageRefused struct{ Why string }
	// WebhookAttempted: one delivery attempt is recorded; Result is "delivered", "retrying" or
	// "failed".
	WebhookAttempted struct {
		Job    ulid.ULID
		Result string
	}
	// TokenRevoked: an API token (its Hash) of Team no longer works.
	TokenRevoked struct {
		Hash [32]byte
		Team ulid.ULID
	}
)
