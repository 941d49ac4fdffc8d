package actors

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// jobActor owns one job. Its rules are the job book's (job_book.go); the actor carries out what
// the book decides and is the only writer of the job's record after creation: a change is
// adopted only once durable, and while a write (or an output's check) is in flight, other
// messages wait in arrival order, so each message sees the state left by the one before.
//
// It is a virtual actor: it lives only while something happens to the job. A queued job has no
// actor, only its entry in the scheduler's queue; any message addressed to a job (an offer, a
// cancel, a child's news) activates its actor from the store, and the actor passivates once idle
// for Config.PassivateAfter, in any state but rendering (a render sends progress, and its
// timers and unsaved progress live in the book).
type jobActor struct {
	w     *jobWorld
	book  *jobBook
	entry *registryEntry
	// held keeps messages that arrive while a write is in flight.
	held holdQueue
	// idle passivates the actor once nothing happened to the job for a while.
	idle idleTimer
}

// jobWorld is what every job actor is given: the store its job is read from and written to, the
// actors it tells (the scheduler, the webhook dispatcher, other jobs, cancel walks), the secrets
// it hides in what nodes report, and the rules and timings of jobs.
type jobWorld struct {
	rules     jobRules
	store     jobStore
	clock     clock.Clock
	ids       IDs
	events    *Events
	log       *slog.Logger
	root      *actor.RootContext
	addr      *addresses
	jobs      *jobDirectory
	walks     *cancelWalks
	adoptions *adoptionBook
	secrets   *secretReader
	outputs   *outputStore
	nodes     *nodeDirectory
	idle      idleRule
}

// jobStore is what a job actor reads and writes.
type jobStore interface {
	Job(jobID ulid.ULID) (*persistence.Job, error)
	Jobs(ids []ulid.ULID) ([]*persistence.Job, error)
	ApplyAsync(c persistence.Command, done func(error))
}

// producer makes the actor of a job whose record the caller holds; resume is set by a restart.
func (w *jobWorld) producer(job *persistence.Job, resume bool) func(*registryEntry) actor.Actor {
	return func(e *registryEntry) actor.Actor {
		return &jobActor{w: w, book: newJobBook(w.rules, w.ids, job, resume), entry: e}
	}
}

// load makes the actor of a stored job.
func (w *jobWorld) load(jobID ulid.ULID) (func(*registryEntry) actor.Actor, error) {
	job, err := w.store.Job(jobID)
	if err != nil {
		return nil, err
	}
	return w.producer(job, false), nil
}

// writeDone carries the end of a write of the job's record back into the actor, with the sender
// of the message that asked for it.
type writeDone struct {
	write  jobWrite
	sender *actor.PID
	err    error
}

func (a *jobActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if a.book.readsChildrenAtStart() {
			a.readChildren(ctx)
		}
		a.carryOut(ctx, nil, a.book.onStart(a.w.clock.Now()))
		a.restartIdle(ctx)
	case *writeDone:
		if msg.err != nil {
			a.log().Error("cannot write "+msg.write.what, "err", msg.err)
		}
		a.held.busy = false
		a.resumeAfter(ctx, msg.sender, a.book.written(msg.write, msg.err))
	case *outputConfirmed:
		a.held.busy = false
		a.resumeAfter(ctx, nil, a.book.on(a.w.clock.Now(), msg))
	case *mail:
		msg.received()
		if !a.held.hold(msg.msg, ctx.Sender()) {
			a.handle(ctx, msg.msg, ctx.Sender())
		}
		a.restartIdle(ctx)
	case *idleCheck:
		if a.idle.current(msg) && a.idleNow() {
			a.passivate(ctx)
		}
	case *actor.Stopping:
		a.idle.stop()
	}
}

// resumeAfter carries out what follows a write or a check, then replays the messages held
// meanwhile: they must see what it did (a claimed offer's assignment sent, a requeued job
// enqueued).
func (a *jobActor) resumeAfter(ctx actor.Context, sender *actor.PID, out effects) {
	a.carryOut(ctx, sender, out)
	if !a.held.busy {
		a.held.release(func(msg any, sender *actor.PID) { a.handle(ctx, msg, sender) })
	}
	a.restartIdle(ctx)
}

// handle gives the book a message, after what only the actor can do: hiding the job's secrets in
// a node's report, reading a parent's children, claiming an interrupted attempt from the
// adoption book.
func (a *jobActor) handle(ctx actor.Context, msg any, sender *actor.PID) {
	job := a.book.job
	switch m := msg.(type) {
	case *renderProgress:
		_, m.log = a.scrub("", m.log)
	case *renderDone:
		_, m.log = a.scrub("", m.log)
	case *renderFailed:
		m.err, m.log = a.scrub(m.err, m.log)
	case *childFinished, *childFailed, *chunkProgress:
		if a.book.childrenUnknown() && !a.readChildren(ctx) {
			return // reading them acted on what they did meanwhile (the job joins or fails)
		}
	case *adoptionExpired:
		if _, unclaimed := a.w.adoptions.claim(job.ID, m.attempt, ""); !unclaimed {
			return
		}
	}
	a.carryOut(ctx, sender, a.book.on(a.w.clock.Now(), msg))
}

// readChildren gives the book a pending parent's children; false when what it did about them
// holds the actor (a write in flight).
func (a *jobActor) readChildren(ctx actor.Context) bool {
	children, err := a.w.store.Jobs(a.book.job.Children)
	a.carryOut(ctx, nil, a.book.onChildren(a.w.clock.Now(), children, err))
	return !a.held.busy
}

// scrub hides the job's secret values in what a node reported (a node of an older release, or a
// tool that printed them), so they are never stored or served.
func (a *jobActor) scrub(err string, log []string) (string, []string) {
	if err == "" && len(log) == 0 {
		return err, log
	}
	revealed := a.w.secrets.forJob(a.book.job)
	return revealed.Scrub(err), revealed.ScrubAll(log)
}

// carryOut does what the book decided, in order; sender is whom a reply goes to. A write of the
// job's record, or an output's check, holds later messages until it ends.
func (a *jobActor) carryOut(ctx actor.Context, sender *actor.PID, out effects) {
	for _, e := range out {
		switch e := e.(type) {
		case jobWrite:
			if e.next == nil {
				a.w.apply(e, sender)
				continue
			}
			a.held.busy = true
			self, root := ctx.Self(), a.w.root
			a.w.store.ApplyAsync(e.cmd, func(err error) {
				if r, ok := e.cmd.(*persistence.RetagJob); ok && err == nil && r.Job == nil {
					err = fmt.Errorf("%w: the job was no longer waiting", ErrNotWaiting)
				}
				root.Send(self, &writeDone{write: e, sender: sender, err: err})
			})
		case confirmUpload:
			a.held.busy = true
			self, root, key, outputs := ctx.Self(), a.w.root, a.book.job.OutputKey(), a.w.outputs
			go func() { root.Send(self, &outputConfirmed{done: e.done, err: outputs.confirm(key, e.done.output)}) }()
		default:
			a.w.carryOut(sender, e)
		}
	}
}

// apply writes what leaves the job's record as it is (a log line, files to forget); what
// follows it is carried out from the store's answer.
func (w *jobWorld) apply(e jobWrite, sender *actor.PID) {
	w.store.ApplyAsync(e.cmd, func(err error) {
		follow := e.then
		if err != nil {
			w.log.Warn("cannot write "+e.what, "err", err)
			follow = e.failed
		}
		for _, f := range follow {
			w.carryOut(sender, f)
		}
	})
}

// carryOut does an effect that sends, publishes or logs: it may run off the actor (from the
// store's answer, or a timer).
func (w *jobWorld) carryOut(sender *actor.PID, e effect) {
	switch e := e.(type) {
	case reply:
		if sender != nil {
			w.root.Send(sender, e.msg)
		}
	case toJob:
		w.jobs.tell(e.job, e.msg)
	case toService:
		w.root.Send(w.addr.service(e.to), e.msg)
	case toNode:
		pid := e.pid
		if pid == nil {
			pid = w.nodes.pid(e.node)
		}
		if pid != nil {
			w.root.Send(pid, e.msg)
		}
	case settleReport:
		if e.to != nil {
			w.root.Send(e.to, &reportSettled{jobID: e.job, attempt: e.attempt})
		}
	case cascade:
		w.walks.start(e.jobs, e.by, nil)
	case published:
		w.events.publishJobEvent(e.event)
	case later:
		w.clock.AfterFunc(e.after, func() { w.carryOut(sender, e.eff) })
	case logged:
		w.log.Log(context.Background(), e.level, e.msg, e.args...)
	default:
		w.log.Error("a job's effect has no way to be carried out", "effect", fmt.Sprintf("%T", e))
	}
}

// log is the actor's logger (made when needed: most actors never log).
func (a *jobActor) log() *slog.Logger { return a.w.log.With("job", a.book.job.ID.String()) }

// idleNow reports whether the actor may passivate: no write in flight and no render going on.
func (a *jobActor) idleNow() bool {
	return !a.held.busy && a.book.job.State != persistence.JobRendering
}

// restartIdle lets an idle actor go: a terminal job's at once (nothing more will happen to it
// but a rare cancel or lookup, and a burst of cancels must not leave thousands of actors behind),
// any other after Config.PassivateAfter. A terminal actor that cannot go yet has a message on
// its way, after which this runs again.
func (a *jobActor) restartIdle(ctx actor.Context) {
	switch {
	case !a.idleNow():
	case a.book.job.State.Terminal():
		a.idle.stop()
		a.passivate(ctx)
	default:
		a.idle.reset(a.w.idle, ctx.Self())
	}
}

// passivate stops the actor unless a message is on its way to it.
func (a *jobActor) passivate(ctx actor.Context) {
	if a.w.jobs.tryPassivate(a.book.job.ID, a.entry) {
		ctx.Stop(ctx.Self())
		a.w.events.JobActorStopped.Publish(JobActorStopped{Job: a.book.job.ID})
	}
}
