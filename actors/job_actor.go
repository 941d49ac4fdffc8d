package actors

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// jobActor owns one job. It is the only writer of the job's record after creation: every change
// is applied to a copy, persisted, and adopted only once durable. While a write is in flight,
// other messages wait in arrival order, so each message sees the state left by the one before.
//
// It is a virtual actor: it lives only while something happens to the job. A queued job has no
// actor, only its entry in the scheduler's queue; any message addressed to a job (an offer, a
// cancel, a child's news) activates its actor from the store, and the actor passivates once idle
// for Config.PassivateAfter, in any state but rendering (a render sends progress, and its
// timers and unsaved progress live here).
type jobActor struct {
	w     *jobWorld
	job   *persistence.Job
	entry *registryEntry
	// resume is set when a coordinator restart activates the job: an attempt it finds rendering
	// was interrupted. Any other activation finds the job as its last write left it.
	resume bool

	// held keeps messages that arrive while a write is in flight.
	held holdQueue
	// idle passivates the actor once nothing happened to the job for a while.
	idle idleTimer
	// waitingOn holds the children a pending parent still waits for; chunks, of a split job,
	// what its chunks rendered so far.
	waitingOn map[ulid.ULID]bool
	chunks    *chunkTally
	// chunkSaveDue is set while a save of the chunks' progress is scheduled.
	chunkSaveDue bool
	// progressSavedAt is when progress was last persisted; progress is saved at most once per
	// Config.ProgressInterval, state changes always.
	progressSavedAt time.Time
	// liveLog holds the log lines attempt liveAttempt reported with its progress that are not
	// saved yet: they go with its next saved progress, or before its result's own lines.
	liveLog     []string
	liveLogAt   []time.Time
	liveAttempt int
}

// jobWorld is what every job actor is given: the store its job is read from and written to, the
// actors it tells (the scheduler, the webhook dispatcher, other jobs, cancel walks), the secrets
// it hides in what nodes report, and the rules and timings of jobs.
type jobWorld struct {
	cfg       Config
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
	// cleanRestart is true when the previous process shut down gracefully: renders it
	// interrupted do not count as failed attempts.
	cleanRestart bool
}

// jobStore is what a job actor reads and writes.
type jobStore interface {
	Job(jobID ulid.ULID) (*persistence.Job, error)
	Jobs(ids []ulid.ULID) ([]*persistence.Job, error)
	ApplyAsync(c persistence.Command, done func(error))
}

// producer makes the actor of a job whose record the caller holds; resume is set by a restart.
func (w *jobWorld) producer(job *persistence.Job, resume bool) func(*registryEntry) actor.Actor {
	return func(e *registryEntry) actor.Actor { return &jobActor{w: w, job: job, entry: e, resume: resume} }
}

// load makes the actor of a stored job.
func (w *jobWorld) load(jobID ulid.ULID) (func(*registryEntry) actor.Actor, error) {
	job, err := w.store.Job(jobID)
	if err != nil {
		return nil, err
	}
	return w.producer(job, false), nil
}

// jobDirectory reaches the actor of any job, activating it from the store when it has none.
type jobDirectory struct {
	*registry
	log *slog.Logger
}

// tell sends msg to a job, logging when the job cannot be reached.
func (d *jobDirectory) tell(jobID ulid.ULID, msg any) error {
	err := d.deliver(jobID, msg, nil)
	if err != nil {
		d.log.Warn("message for a job that cannot be reached", "job", jobID.String(), "err", err)
	}
	return err
}

// settled tells the NodeActor that forwarded a node's result (to) that the job's outcome of it
// is durable: only then is the node told it may forget the result.
func (w *jobWorld) settled(to *actor.PID, jobID ulid.ULID, attempt int) {
	if to != nil {
		w.root.Send(to, &reportSettled{jobID: jobID, attempt: attempt})
	}
}

func (a *jobActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *writeDone:
		a.finishWrite(ctx, msg)
	case *outputConfirmed:
		a.onOutputConfirmed(ctx, msg)
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

func (a *jobActor) handle(ctx actor.Context, msg any, sender *actor.PID) {
	switch msg := msg.(type) {
	case *offer:
		a.onOffer(ctx, msg)
	case *renderProgress:
		a.onProgress(ctx, msg)
	case *renderDone:
		a.onDone(ctx, msg)
	case *renderFailed:
		a.onFailed(ctx, msg)
	case *cancelRequest:
		a.onCancel(ctx, sender)
	case *stopRequest:
		a.onStop(ctx, msg, sender)
	case *sendAgainRequest:
		a.onSendAgain(ctx, msg, sender)
	case *retagRequest:
		a.onRetag(ctx, msg, sender)
	case *childFinished:
		if a.knowsChildren(ctx) {
			a.onChildFinished(ctx, msg)
		}
	case *chunkProgress:
		if a.knowsChildren(ctx) {
			a.onChunkProgress(ctx, msg)
		}
	case *chunkProgressDue:
		a.chunkSaveDue = false
		if a.job.State == persistence.JobPending && a.chunks != nil {
			a.saveChunkProgress(ctx)
		}
	case *childFailed:
		if a.knowsChildren(ctx) {
			a.onChildFailed(ctx, msg)
		}
	case *relativeFailed:
		// A sweep asking waits for the answer; a parent telling does not.
		ended := func() {
			if sender != nil {
				ctx.Send(sender, &relativeEnded{})
			}
		}
		if a.chunkRendering() {
			a.abandonChunk(ctx, msg.reason, func(error) { ended() })
			return
		}
		a.failWaiting(ctx, EventRelativeFailed, msg.reason, nil, ended)
	case *adoptionExpired:
		a.onAdoptionExpired(ctx, msg)
	case *renderAdopted:
		a.onAdopted(msg)
	default:
		a.log().Warn("job actor ignored an unknown message", "type", fmt.Sprintf("%T", msg))
	}
}

// log is the actor's logger (made when needed: most actors never log).
func (a *jobActor) log() *slog.Logger { return a.w.log.With("job", a.job.ID.String()) }

// start takes the job up from its stored state. A pending parent learns again which children it
// waits for (and acts on any that ended while it had no actor), a split job's when a message
// needs it; after a restart, a rendering job's attempt was interrupted. A queued job needs
// nothing: it is in the scheduler's queue.
func (a *jobActor) start(ctx actor.Context) {
	switch {
	case a.job.State == persistence.JobPending && (a.resume || !a.job.Split()):
		// A split job's chunks, thousands maybe, are read when a message needs them
		// (knowsChildren): its cancel does not.
		a.resumeWaiting(ctx)
	case a.job.State == persistence.JobRendering && a.resume:
		// Its node may still hold the attempt and reclaim it when it reconnects; otherwise it
		// goes back to the queue.
		if a.w.cfg.AdoptAfterRestart {
			a.awaitAdoption()
			return
		}
		a.restartLost(ctx)
	}
	a.restartIdle(ctx)
}

// restartLost queues again a job whose attempt the coordinator's restart interrupted.
func (a *jobActor) restartLost(ctx actor.Context) {
	if len(a.job.Limits) > 0 {
		ctx.Send(a.w.addr.scheduler, &limitsReleased{job: a.job.ID})
	}
	a.onFailed(ctx, &renderFailed{
		attempt:   a.job.Attempts,
		node:      a.job.Node,
		err:       "the coordinator restarted during the render",
		retryable: true,
		countless: a.w.cleanRestart || a.w.cfg.Takeover,
	})
}

// awaitAdoption gives the job's node the adopt window to reclaim the attempt the coordinator's
// restart interrupted (Start offered it); unclaimed, it is queued again.
func (a *jobActor) awaitAdoption() {
	jobID, attempt := a.job.ID, a.job.Attempts
	a.w.clock.AfterFunc(a.w.cfg.AdoptWindow, func() {
		a.w.jobs.tell(jobID, &adoptionExpired{attempt: attempt})
	})
}

// onAdopted says in the job's log that its render went on across the coordinator's restart or a
// failover, rather than start again.
func (a *jobActor) onAdopted(m *renderAdopted) {
	if a.job.State != persistence.JobRendering || a.job.Attempts != m.attempt {
		return
	}
	across := "the coordinator's restart"
	if a.w.cfg.Takeover {
		across = "a failover (another replica leads the farm now)"
	}
	line := fmt.Sprintf("attempt %d on node %s carried on across %s: the render goes on, reporting to the new coordinator", m.attempt, m.node, across)
	jobID := a.job.ID
	a.w.store.ApplyAsync(&persistence.AppendJobLog{At: a.w.clock.Now(), JobID: jobID, Lines: []string{line}}, func(err error) {
		if err != nil {
			a.w.log.Warn("cannot record an adoption in the job's log", "job", jobID.String(), "err", err)
		}
	})
}

func (a *jobActor) onAdoptionExpired(ctx actor.Context, m *adoptionExpired) {
	if _, unclaimed := a.w.adoptions.claim(a.job.ID, m.attempt, ""); unclaimed &&
		a.job.State == persistence.JobRendering && a.job.Attempts == m.attempt {
		a.restartLost(ctx)
	}
}

// idleNow reports whether the actor may passivate: no write in flight and no render going on.
func (a *jobActor) idleNow() bool {
	return !a.held.busy && a.job.State != persistence.JobRendering
}

// restartIdle lets an idle actor go: a terminal job's at once (nothing more will happen to it
// but a rare cancel or lookup, and a burst of cancels must not leave thousands of actors behind),
// any other after Config.PassivateAfter. A terminal actor that cannot go yet has a message on
// its way, after which this runs again.
func (a *jobActor) restartIdle(ctx actor.Context) {
	switch {
	case !a.idleNow():
	case a.job.State.Terminal():
		a.idle.stop()
		a.passivate(ctx)
	default:
		a.idle.reset(a.w.idle, ctx.Self())
	}
}

// passivate stops the actor unless a message is on its way to it.
func (a *jobActor) passivate(ctx actor.Context) {
	if a.w.jobs.tryPassivate(a.job.ID, a.entry) {
		ctx.Stop(ctx.Self())
		a.w.events.JobActorStopped.Publish(JobActorStopped{Job: a.job.ID})
	}
}

func (a *jobActor) enqueue(ctx actor.Context) {
	ctx.Send(a.w.addr.scheduler, &jobsQueued{entries: []persistence.QueueEntry{a.job.QueueEntry()}})
}

// resumeWaiting loads a pending parent's children and acts on what they already did.
func (a *jobActor) resumeWaiting(ctx actor.Context) {
	a.waitingOn = make(map[ulid.ULID]bool)
	var failed, cancelled *persistence.Job
	children, err := a.w.store.Jobs(a.job.Children)
	for i, child := range children {
		switch {
		case err != nil:
		case child == nil:
			err = fmt.Errorf("child %s: %w", a.job.Children[i], persistence.ErrNotFound)
		case child.State == persistence.JobFinished:
		case child.State == persistence.JobFailed:
			failed = child
		case child.State == persistence.JobCancelled:
			cancelled = child
		default:
			a.waitingOn[child.ID] = true
		}
	}
	if err == nil && a.job.Split() {
		a.chunks = newChunkTally(children)
	}
	switch {
	case err != nil:
		a.log().Error("cannot load the children of a pending job", "err", err)
	case failed != nil:
		a.onChildFailed(ctx, &childFailed{child: failed.ID, reason: failed.Error})
	case cancelled != nil:
		// A cancel cascade reached a child and goes on to this parent. After a restart it may
		// have been cut short: finish it from here. Otherwise the cascade in flight arrives
		// itself (a second walk would race it for the jobs its answer lists).
		if a.resume {
			a.w.walks.start([]ulid.ULID{a.job.ID}, nil)
		}
	case len(a.waitingOn) == 0:
		a.childrenFinished(ctx)
	}
}

func (a *jobActor) onOffer(ctx actor.Context, o *offer) {
	if a.job.State != persistence.JobQueued {
		ctx.Send(a.w.addr.scheduler, &offerDeclined{jobID: a.job.ID})
		return
	}
	now := a.w.clock.Now()
	err := a.transition(ctx, EventDispatched, func(next *persistence.Job) {
		next.Attempts++
		next.Node = o.nodeID
		next.StorageRetryAt = time.Time{}
		next.AttemptStartedAt = now
		if !a.job.Split() || next.StartedAt.IsZero() { // a split job started with its first chunk
			next.StartedAt = now
		}
		next.Progress = a.startingProgress()
	}, []string{fmt.Sprintf("dispatched to node %s (attempt %d)", o.nodeID, a.job.Attempts+1)},
		func(err error) {
			if err != nil {
				ctx.Send(a.w.addr.scheduler, &offerDeclined{jobID: a.job.ID})
				return
			}
			ctx.Send(a.w.addr.scheduler, &offerClaimed{jobID: a.job.ID})
			ctx.Send(o.node, &assign{job: a.job, queuedAt: o.queuedAt})
			a.tellChunkProgress(0)
		})
	if err != nil {
		ctx.Send(a.w.addr.scheduler, &offerDeclined{jobID: a.job.ID})
	}
}

// current reports whether a node's report belongs to the attempt now rendering; anything else is
// a stale attempt and is rejected. A stale result is recorded in the job's log, and its node
// told (settle) once that is durable.
func (a *jobActor) current(attempt int, what, node string, settle *actor.PID) bool {
	if a.job.State == persistence.JobRendering && attempt == a.job.Attempts {
		return true
	}
	a.log().Warn("rejected a report from a stale attempt", "report", what, "attempt", attempt, "node", node,
		"current_attempt", a.job.Attempts, "state", a.job.State.String())
	jobID := a.job.ID
	if what == "progress" {
		a.w.events.StaleReport.Publish(StaleReport{Job: jobID, Attempt: attempt, What: what})
		return false
	}
	line := fmt.Sprintf("rejected the %s report of attempt %d from node %s: the job is %s at attempt %d",
		what, attempt, node, a.job.State, a.job.Attempts)
	appended := &persistence.AppendJobLog{At: a.w.clock.Now(), JobID: jobID, Lines: []string{line}}
	a.w.store.ApplyAsync(appended, func(err error) {
		if err != nil {
			a.w.log.Error("cannot record a rejected report", "job", jobID.String(), "err", err)
		} else {
			a.w.settled(settle, jobID, attempt)
		}
		a.w.events.StaleReport.Publish(StaleReport{Job: jobID, Attempt: attempt, What: what})
	})
	return false
}

// repeated reports whether a result is one this job already took from its node: the node sent
// it again before hearing that it was settled. It is settled again, and changes nothing.
func (a *jobActor) repeated(attempt int, node string, done bool, failure string) bool {
	if attempt != a.job.Attempts || node != a.job.Node {
		return false
	}
	if done {
		return a.job.State == persistence.JobFinished
	}
	return slices.ContainsFunc(a.job.Failures, func(f persistence.AttemptFailure) bool {
		return f.Attempt == attempt && f.Node == node && f.Error == failure
	})
}

func (a *jobActor) onProgress(ctx actor.Context, p *renderProgress) {
	if !a.current(p.attempt, "progress", "", nil) {
		return
	}
	_, lines := a.scrubReport("", p.log)
	a.keepLiveLog(p.attempt, lines, p.logAt)
	percent := min(max(p.percent, 0), 100)
	a.tellChunkProgress(percent)
	if a.job.Split() { // the join, after the chunks
		percent = chunksShare + percent*(100-chunksShare)/100
	}
	now := a.w.clock.Now()
	if now.Sub(a.progressSavedAt) < a.w.cfg.ProgressInterval {
		a.job = a.job.WithProgress(percent)
		return
	}
	a.progressSavedAt = now
	next := a.job.WithProgress(percent)
	log, logAt := a.takeLiveLog(p.attempt, nil, nil)
	a.persist(ctx, a.job.State, next, log, logAt, nil, func(err error) {
		if err == nil {
			a.w.events.JobProgressSaved.Publish(JobProgressSaved{Job: a.job.ID, Percent: percent})
		}
	})
}

// keepLiveLog holds lines an attempt reported with its progress until they are saved.
func (a *jobActor) keepLiveLog(attempt int, lines []string, at []time.Time) {
	if len(lines) == 0 {
		return
	}
	if attempt != a.liveAttempt {
		a.liveLog, a.liveLogAt, a.liveAttempt = nil, nil, attempt
	}
	if len(at) != len(lines) {
		at = make([]time.Time, len(lines)) // not known: they take the time they are saved
	}
	room := persistence.MaxLogLines - len(a.liveLog) // the job's log keeps no more anyway
	if room < len(lines) {
		lines, at = lines[:max(room, 0)], at[:max(room, 0)]
	}
	a.liveLog, a.liveLogAt = append(a.liveLog, lines...), append(a.liveLogAt, at...)
}

// takeLiveLog returns an attempt's unsaved live lines followed by log (whose times, logAt, may
// be fewer than its lines), and forgets them.
func (a *jobActor) takeLiveLog(attempt int, log []string, logAt []time.Time) ([]string, []time.Time) {
	if attempt != a.liveAttempt || len(a.liveLog) == 0 {
		return log, logAt
	}
	lines := append(a.liveLog, log...)
	at := append(a.liveLogAt, logAt...)
	// Lines of log without a time take the zero time, which the write reads as its own.
	at = append(at, make([]time.Time, max(len(lines)-len(at), 0))...)
	a.liveLog, a.liveLogAt = nil, nil
	return lines, at
}

// scrubReport hides the job's secret values in what a node reported (a node of an older release,
// or a tool that printed them), so they are never stored or served.
func (a *jobActor) scrubReport(err string, log []string) (string, []string) {
	if err == "" && len(log) == 0 {
		return err, log
	}
	revealed := a.w.secrets.forJob(a.job)
	return revealed.Scrub(err), revealed.ScrubAll(log)
}

func (a *jobActor) onDone(ctx actor.Context, d *renderDone) {
	_, d.log = a.scrubReport("", d.log)
	if a.repeated(d.attempt, d.node, true, "") {
		a.w.settled(d.settle, a.job.ID, d.attempt)
		return
	}
	if !a.current(d.attempt, "done", d.node, d.settle) {
		return
	}
	d.log, d.logAt = a.takeLiveLog(d.attempt, d.log, d.logAt)
	if d.output != nil || (a.w.outputs.uploads != nil && a.job.OutputInFarm()) {
		a.confirmOutput(ctx, d)
		return
	}
	a.finish(ctx, d)
}

// confirmOutput checks, off the actor, that a node's upload to the farm's bucket is there whole
// (completing a multipart upload first) before the job finishes on it: no job is finished
// without its output. Messages wait meanwhile.
func (a *jobActor) confirmOutput(ctx actor.Context, d *renderDone) {
	a.held.busy = true
	self, root, key, outputs := ctx.Self(), a.w.root, a.job.OutputKey(), a.w.outputs
	go func() { root.Send(self, &outputConfirmed{done: d, err: outputs.confirm(key, d.output)}) }()
}

func (a *jobActor) onOutputConfirmed(ctx actor.Context, m *outputConfirmed) {
	a.held.busy = false
	d := m.done
	if m.err != nil {
		a.onFailed(ctx, &renderFailed{attempt: d.attempt, node: d.node, retryable: true, countless: true, farm: true,
			err: "the output is not in the object store: " + m.err.Error(), log: d.log, logAt: d.logAt, settle: d.settle})
	} else {
		a.finish(ctx, d)
	}
	if !a.held.busy {
		a.held.release(func(msg any, sender *actor.PID) { a.handle(ctx, msg, sender) })
	}
	a.restartIdle(ctx)
}

// finish records the render of the attempt now rendering as the job's output.
func (a *jobActor) finish(ctx actor.Context, d *renderDone) {
	now := a.w.clock.Now()
	log := append(slices.Clip(d.log), fmt.Sprintf("finished on node %s in %s", d.node, d.duration.Round(time.Millisecond)))
	took := d.duration
	if a.job.Split() && !a.job.StartedAt.IsZero() {
		// A split job's render is its chunks' and its join's: from its first chunk's start.
		took = now.Sub(a.job.StartedAt)
		log = append(log, fmt.Sprintf("the split render took %s from its first chunk's start to the end of its join", took.Round(time.Millisecond)))
	}
	a.transitionLogged(ctx, EventRenderFinished, func(next *persistence.Job) {
		next.Progress = 100
		next.FinishedAt = now
		next.RenderDuration = took
		next.OutputBytes = d.size
	}, log, d.logAt, func(err error) {
		if err != nil {
			return
		}
		a.w.settled(d.settle, a.job.ID, d.attempt)
		a.w.events.RenderFinished.Publish(RenderFinished{Engine: a.job.Engine, Took: d.duration})
		a.finished(ctx)
	})
}

func (a *jobActor) onFailed(ctx actor.Context, f *renderFailed) {
	f.err, f.log = a.scrubReport(f.err, f.log)
	if a.repeated(f.attempt, f.node, false, f.err) {
		a.w.settled(f.settle, a.job.ID, f.attempt)
		return
	}
	if !a.current(f.attempt, "failure", f.node, f.settle) {
		return
	}
	f.log, f.logAt = a.takeLiveLog(f.attempt, f.log, f.logAt)
	now := a.w.clock.Now()
	failure := persistence.AttemptFailure{Attempt: f.attempt, Node: f.node, Error: f.err, At: now}
	failures := a.job.Failures
	if !f.countless {
		failures = append(slices.Clone(failures), failure)
	}
	log := append(slices.Clip(f.log), fmt.Sprintf("attempt %d on node %s ended: %s", f.attempt, f.node, f.err))
	if f.retryable && len(failures) < a.w.cfg.MaxAttempts {
		requeued := "queued again"
		wait := storageWait(a.w.cfg.StorageRetry, a.job.Attempts-len(failures))
		if f.farm {
			requeued = fmt.Sprintf("the farm's storage failed the attempt, which does not count: queued again in %s", wait)
		}
		a.transitionLogged(ctx, EventAttemptLost, func(next *persistence.Job) {
			next.Failures = failures
			next.Progress = a.startingProgress()
			if f.farm {
				next.StorageRetryAt = now.Add(wait)
			}
		}, append(log, requeued), f.logAt, func(err error) {
			if err != nil {
				return
			}
			a.w.settled(f.settle, a.job.ID, f.attempt)
			a.w.events.JobRequeued.Publish(JobRequeued{Job: a.job.ID})
			if !f.farm {
				a.enqueue(ctx)
				return
			}
			// The storage may answer again by then; a job withdrawn meanwhile declines its offer.
			entry, root, scheduler := a.job.QueueEntry(), a.w.root, a.w.addr.scheduler
			a.w.clock.AfterFunc(wait, func() {
				root.Send(scheduler, &jobsQueued{entries: []persistence.QueueEntry{entry}})
			})
		})
		return
	}
	message := f.err
	if f.retryable {
		message = attemptsMessage(failures)
	}
	a.transitionLogged(ctx, EventRenderFailed, func(next *persistence.Job) {
		next.Failures = failures
		next.Error = message
		next.ErrorAt = now
	}, log, f.logAt, func(err error) {
		if err == nil {
			a.w.settled(f.settle, a.job.ID, f.attempt)
			a.notifyParent(ctx, &childFailed{child: a.job.ID, reason: message})
		}
	})
}

// storageWait is how long a job waits after its storage failed it again: base after the first
// uncounted attempt, doubling with each further one up to 32 times base, so a long outage of the
// store is not asked about by every waiting job every few seconds.
func storageWait(base time.Duration, uncounted int) time.Duration {
	return base << min(max(uncounted-1, 0), 5)
}

func attemptsMessage(failures []persistence.AttemptFailure) string {
	parts := make([]string, len(failures))
	for i, f := range failures {
		parts[i] = fmt.Sprintf("attempt %d on node %s: %s", f.Attempt, f.Node, f.Error)
	}
	return fmt.Sprintf("render failed after %d attempts (%s)", len(failures), strings.Join(parts, "; "))
}

func (a *jobActor) onCancel(ctx actor.Context, sender *actor.PID) {
	answer := func() {
		res := &cancelResult{jobID: a.job.ID, job: a.job, cancelled: a.job.State == persistence.JobCancelled}
		if res.cancelled {
			res.relatives = a.relatives()
		}
		ctx.Send(sender, res)
	}
	if a.chunkRendering() {
		a.abandonChunk(ctx, "its job was cancelled", func(err error) {
			ctx.Send(sender, &cancelResult{jobID: a.job.ID, job: a.job, cancelled: err == nil, relatives: a.relatives()})
		})
		return
	}
	if !a.job.State.Cancellable() {
		ctx.Send(sender, &cancelResult{jobID: a.job.ID, job: a.job})
		return
	}
	wasQueued := a.job.State == persistence.JobQueued
	now := a.w.clock.Now()
	err := a.transition(ctx, EventCancel, func(next *persistence.Job) {
		next.Error = "cancelled through the API"
		next.ErrorAt = now
	}, []string{"cancelled"}, func(err error) {
		if err == nil && wasQueued {
			ctx.Send(a.w.addr.scheduler, &jobWithdrawn{jobID: a.job.ID})
		}
		if err != nil {
			a.log().Error("cannot persist a cancellation", "err", err)
		}
		answer()
	})
	if err != nil {
		answer()
	}
}

// onStop ends a rendering job as cancelled by its owner: once that is durable, the node is told
// to abandon the attempt (its slot comes back), what the attempt may have stored is forgotten,
// and the job's relatives are cancelled as a cancel's cascade would.
func (a *jobActor) onStop(ctx actor.Context, m *stopRequest, sender *actor.PID) {
	if a.job.State != persistence.JobRendering {
		ctx.Send(sender, &jobAnswer{job: a.job, err: fmt.Errorf("%w: the job is %s, not rendering", ErrNotRendering, a.job.State)})
		return
	}
	err := a.withdraw(ctx, "stopped by "+m.by, func(err error) {
		if err != nil {
			ctx.Send(sender, &jobAnswer{err: err})
			return
		}
		if rel := a.relatives(); len(rel) > 0 {
			a.w.walks.start(rel, nil)
		}
		ctx.Send(sender, &jobAnswer{job: a.job})
	})
	if err != nil {
		ctx.Send(sender, &jobAnswer{err: err})
	}
}

// onSendAgain takes a rendering job's attempt back from its node and queues the job again, as a
// lost attempt that does not count: an operator moving a render stuck on a slow node.
func (a *jobActor) onSendAgain(ctx actor.Context, m *sendAgainRequest, sender *actor.PID) {
	if a.job.State != persistence.JobRendering {
		ctx.Send(sender, &jobAnswer{job: a.job, err: fmt.Errorf("%w: it is %s; only a rendering job is sent again", ErrNotRendering, a.job.State)})
		return
	}
	attempt, node := a.job.Attempts, a.job.Node
	line := fmt.Sprintf("attempt %d on node %s taken back by %s: queued again (it does not count)", attempt, node, m.by)
	err := a.transition(ctx, EventAttemptLost, func(next *persistence.Job) {
		next.Progress = a.startingProgress()
	}, []string{line}, func(err error) {
		if err != nil {
			ctx.Send(sender, &jobAnswer{err: err})
			return
		}
		a.takeBack(ctx, node, attempt, "sent again by "+m.by)
		a.w.events.JobRequeued.Publish(JobRequeued{Job: a.job.ID})
		a.enqueue(ctx)
		ctx.Send(sender, &jobAnswer{job: a.job})
	})
	if err != nil {
		ctx.Send(sender, &jobAnswer{err: err})
	}
}

// withdraw ends the job's render as cancelled (the stop event) for reason: once that is durable,
// the node is told to abandon the attempt (its slot comes back) and what the attempt may have
// stored is forgotten; then runs after.
func (a *jobActor) withdraw(ctx actor.Context, reason string, then func(error)) error {
	now := a.w.clock.Now()
	attempt, node := a.job.Attempts, a.job.Node
	return a.transition(ctx, EventStop, func(next *persistence.Job) {
		next.Error = reason
		next.ErrorAt = now
	}, []string{fmt.Sprintf("%s while rendering on node %s (attempt %d)", reason, node, attempt)}, func(err error) {
		if err != nil {
			a.log().Error("cannot persist a stop", "err", err)
			then(err)
			return
		}
		a.takeBack(ctx, node, attempt, reason)
		a.forget(a.job.OutputsToForget())
		then(nil)
	})
}

// takeBack tells the node an attempt it renders is no longer wanted (its slot comes back).
func (a *jobActor) takeBack(ctx actor.Context, node string, attempt int, reason string) {
	if pid := a.w.nodes.pid(node); pid != nil {
		ctx.Send(pid, &withdrawAttempt{jobID: a.job.ID, attempt: attempt, reason: reason})
	}
}

// forget queues the objects under the keys for deletion.
func (a *jobActor) forget(keys ...string) {
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "" })
	if len(keys) == 0 {
		return
	}
	a.w.store.ApplyAsync(&persistence.ForgetObjects{Keys: keys}, func(err error) {
		if err != nil {
			a.w.log.Warn("cannot queue a job's files for deletion", "job", a.job.ID.String(), "err", err)
		}
	})
}

// onRetag gives a queued or pending job another priority and tags; a queued one takes its new
// place in the scheduler's queue once that is durable.
func (a *jobActor) onRetag(ctx actor.Context, m *retagRequest, sender *actor.PID) {
	if !a.job.State.Cancellable() {
		if sender != nil {
			ctx.Send(sender, &jobAnswer{job: a.job, err: fmt.Errorf("%w: the job is %s", ErrNotWaiting, a.job.State)})
		}
		return
	}
	change := &persistence.RetagJob{At: a.w.clock.Now(), JobID: a.job.ID, Priority: a.job.Priority, Tags: a.job.Tags}
	if m.priority != nil {
		change.Priority = *m.priority
	}
	if m.tags != nil {
		change.Tags = *m.tags
	}
	change.Line = fmt.Sprintf("priority %d and tags [%s] set by %s", change.Priority, strings.Join(change.Tags, ","), m.by)
	a.held.busy = true
	self, prev := ctx.Self(), a.job
	a.w.store.ApplyAsync(change, func(err error) {
		if err == nil && change.Job == nil {
			err = fmt.Errorf("%w: the job was no longer waiting", ErrNotWaiting)
		}
		next := change.Job
		if err != nil {
			next = prev
		}
		a.w.root.Send(self, &writeDone{err: err, next: next, then: func(err error) {
			if err == nil && a.job.State == persistence.JobQueued {
				ctx.Send(a.w.addr.scheduler, &jobWithdrawn{jobID: a.job.ID})
				ctx.Send(a.w.addr.scheduler, &jobsQueued{entries: []persistence.QueueEntry{a.job.QueueEntry()}})
			}
			if err == nil && a.job.Split() { // its chunks still waiting take their new place too
				for _, chunk := range a.job.Children {
					a.w.jobs.tell(chunk, &retagRequest{priority: &change.Priority, tags: &change.Tags, by: m.by})
				}
			}
			if sender != nil { // a split job's chunks are told, and answer no one
				ctx.Send(sender, &jobAnswer{job: a.job, err: err})
			}
		}})
	})
}

func (a *jobActor) relatives() []ulid.ULID {
	rel := slices.Clone(a.walkedChildren())
	if a.job.ParentID != (ulid.ULID{}) {
		rel = append(rel, a.job.ParentID)
	}
	return rel
}

// walkedChildren are the children a cascade reaches one by one; a split job's chunks, which may
// be thousands, are swept in the background instead (sweep.go).
func (a *jobActor) walkedChildren() []ulid.ULID {
	if a.job.Split() {
		return nil
	}
	return a.job.Children
}

// knowsChildren makes sure a pending parent knows which children it waits for, reading them
// the first time a message needs it; false when that reading acted on what they did meanwhile
// (the job joins or fails), which the message then needs no more.
func (a *jobActor) knowsChildren(ctx actor.Context) bool {
	if a.waitingOn != nil || a.job.State != persistence.JobPending {
		return true
	}
	a.resumeWaiting(ctx)
	return !a.held.busy
}

// unfinishedChildren are the children a pending parent still waits for, in order: all of them
// when it has not read them.
func (a *jobActor) unfinishedChildren() []ulid.ULID {
	if a.waitingOn == nil {
		return a.job.Children
	}
	var out []ulid.ULID
	for _, id := range a.job.Children {
		if a.waitingOn[id] {
			out = append(out, id)
		}
	}
	return out
}

func (a *jobActor) onChildFinished(ctx actor.Context, m *childFinished) {
	if a.job.State != persistence.JobPending || !a.waitingOn[m.child] {
		return
	}
	delete(a.waitingOn, m.child)
	switch {
	case len(a.waitingOn) == 0:
		a.childrenFinished(ctx)
	case a.chunks != nil:
		a.chunks.set(m.child, 100)
		a.saveChunkProgress(ctx)
	}
}

func (a *jobActor) childrenFinished(ctx actor.Context) {
	line := fmt.Sprintf("all %d child jobs finished; their outputs go into this job", len(a.job.Children))
	if a.job.Split() {
		line = fmt.Sprintf("all %d chunks rendered; queued to join them", len(a.job.Children))
	}
	a.transition(ctx, EventChildrenFinished, func(next *persistence.Job) { next.Progress = a.startingProgress() },
		[]string{line},
		func(err error) {
			if err == nil {
				a.enqueue(ctx)
			}
		})
}

// startingProgress is a job's progress when its render starts: a split job's chunks are done.
func (a *jobActor) startingProgress() float64 {
	if a.job.Split() {
		return chunksShare
	}
	return 0
}

// onChunkProgress takes in how far one chunk of this split job rendered. The job's progress is
// saved at once when its first chunk starts (its client sees it rendering from then on), then at
// most once per Config.ProgressInterval, the last news of an interval saved at its end.
func (a *jobActor) onChunkProgress(ctx actor.Context, m *chunkProgress) {
	if a.job.State != persistence.JobPending || a.chunks == nil || !a.chunks.set(m.chunk, m.percent) {
		return
	}
	wait := a.w.cfg.ProgressInterval - a.w.clock.Now().Sub(a.progressSavedAt)
	switch {
	case a.job.StartedAt.IsZero() || wait <= 0:
		a.saveChunkProgress(ctx)
	case !a.chunkSaveDue:
		a.chunkSaveDue = true
		jobID, jobs := a.job.ID, a.w.jobs
		a.w.clock.AfterFunc(wait, func() { jobs.tell(jobID, &chunkProgressDue{}) })
	}
}

func (a *jobActor) saveChunkProgress(ctx actor.Context) {
	now := a.w.clock.Now()
	a.progressSavedAt = now
	next := a.job.WithProgress(a.chunks.progress())
	if next.StartedAt.IsZero() {
		next.StartedAt = now
	}
	a.persist(ctx, a.job.State, next, nil, nil, nil, func(err error) {
		if err == nil {
			a.w.events.JobProgressSaved.Publish(JobProgressSaved{Job: a.job.ID, Percent: next.Progress})
		}
	})
}

// tellChunkProgress tells a chunk's job how far the chunk rendered.
func (a *jobActor) tellChunkProgress(percent float64) {
	if a.job.Kind == persistence.KindChunk {
		a.w.jobs.tell(a.job.ParentID, &chunkProgress{chunk: a.job.ID, percent: percent})
	}
}

// chunkRendering reports whether this is a chunk rendering: the job it belongs to no longer wants
// it once cancelled or failed, so it stops at once rather than render for nothing.
func (a *jobActor) chunkRendering() bool {
	return a.job.Kind == persistence.KindChunk && a.job.State == persistence.JobRendering
}

// abandonChunk stops a rendering chunk that its job no longer wants.
func (a *jobActor) abandonChunk(ctx actor.Context, reason string, then func(error)) {
	if then == nil {
		then = func(error) {}
	}
	if err := a.withdraw(ctx, reason, then); err != nil {
		then(err)
	}
}

// finished tells whom a finished job concerns: its parent, after the parent's log says which node
// rendered a chunk's frames; and a split job's chunks are deleted, its output holding them now.
func (a *jobActor) finished(ctx actor.Context) {
	if a.job.Kind == persistence.KindChunk {
		j, parent, jobs := a.job, a.job.ParentID, a.w.jobs
		f := j.Spec.Settings.Frames
		line := fmt.Sprintf("frames %d to %d rendered on node %s in %s (attempt %d)", f.Start, f.End, j.Node,
			j.RenderDuration.Round(time.Millisecond), j.Attempts)
		a.w.store.ApplyAsync(&persistence.AppendJobLog{At: a.w.clock.Now(), JobID: parent, Lines: []string{line}}, func(err error) {
			if err != nil {
				a.w.log.Warn("cannot log a chunk's render in its job's log", "job", parent.String(), "err", err)
			}
			jobs.tell(parent, &childFinished{child: j.ID})
		})
		return
	}
	a.notifyParent(ctx, &childFinished{child: a.job.ID})
	if !a.job.Split() {
		return
	}
	keys := make([]string, len(a.job.Children))
	for i, id := range a.job.Children {
		keys[i] = (&persistence.Job{ID: id}).OutputsToForget()
	}
	a.forget(keys...)
}

func (a *jobActor) onChildFailed(ctx actor.Context, m *childFailed) {
	reason := fmt.Sprintf("child job %s failed: %s", m.child, m.reason)
	if a.chunks != nil {
		reason = fmt.Sprintf("%s failed: %s", a.chunks.describe(m.child), m.reason)
	}
	a.failWaiting(ctx, EventChildFailed, reason, &m.child, func() {})
}

// failWaiting fails a queued or pending job because a relative failed, then passes the failure
// on: up to its parent (unless the parent caused it) and down to its other children. then runs
// once the job has ended (or when it cannot).
func (a *jobActor) failWaiting(ctx actor.Context, ev JobEvent, reason string, failedChild *ulid.ULID, then func()) {
	if !a.job.State.Cancellable() {
		then()
		return
	}
	wasQueued := a.job.State == persistence.JobQueued
	now := a.w.clock.Now()
	err := a.transition(ctx, ev, func(next *persistence.Job) {
		next.Error = reason
		next.ErrorAt = now
	}, []string{reason}, func(err error) {
		defer then()
		if err != nil {
			return
		}
		if wasQueued {
			ctx.Send(a.w.addr.scheduler, &jobWithdrawn{jobID: a.job.ID})
		}
		for _, childID := range a.walkedChildren() {
			if failedChild == nil || childID != *failedChild {
				a.w.jobs.tell(childID, &relativeFailed{reason: fmt.Sprintf("parent job %s failed: %s", a.job.ID, reason)})
			}
		}
		if ev == EventChildFailed {
			a.notifyParent(ctx, &childFailed{child: a.job.ID, reason: reason})
		}
	})
	if err != nil {
		then()
	}
}

func (a *jobActor) notifyParent(_ actor.Context, msg any) {
	if a.job.ParentID != (ulid.ULID{}) {
		a.w.jobs.tell(a.job.ParentID, msg)
	}
}

// transition applies ev to a copy of the job, lets edit adjust the copy, and persists it with the
// log lines (and, when the job ends with a webhook, its delivery). then runs once the write is
// durable (err nil) or has failed; an illegal event is returned at once and nothing is written.
func (a *jobActor) transition(ctx actor.Context, ev JobEvent, edit func(*persistence.Job), log []string,
	then func(error)) error {
	return a.transitionLogged(ctx, ev, edit, log, nil, then)
}

// transitionLogged is transition with the times of the first log lines (a node's, written
// while it rendered); the lines past them take the change's time.
func (a *jobActor) transitionLogged(ctx actor.Context, ev JobEvent, edit func(*persistence.Job), log []string,
	logAt []time.Time, then func(error)) error {
	next := a.job.Clone()
	if err := applyJobEvent(next, ev); err != nil {
		a.log().Error("refused a state change", "err", err)
		return err
	}
	if edit != nil {
		edit(next)
	}
	var delivery *persistence.Delivery
	if next.State.Terminal() && next.Spec.Webhook != nil {
		now := a.w.clock.Now()
		delivery = &persistence.Delivery{ID: a.w.ids.New(now), JobID: next.ID, TeamID: next.TeamID, NextAt: now, CreatedAt: now}
	}
	a.persist(ctx, a.job.State, next, log, logAt, delivery, then)
	return nil
}

// persist writes the job's next version; the webhook dispatcher hears of a delivery once it is
// durable.
func (a *jobActor) persist(ctx actor.Context, prev persistence.JobState, next *persistence.Job, log []string,
	logAt []time.Time, delivery *persistence.Delivery, then func(error)) {
	a.held.busy = true
	self := ctx.Self()
	change := &persistence.ChangeJob{At: a.w.clock.Now(), Prev: prev, Job: next, Log: log, LogAt: logAt, Delivery: delivery}
	a.w.store.ApplyAsync(change, func(err error) {
		if err == nil && delivery != nil {
			a.w.root.Send(a.w.addr.webhooks, &deliveryQueued{delivery: delivery})
		}
		a.w.root.Send(self, &writeDone{err: err, next: next, then: then})
	})
}

func (a *jobActor) finishWrite(ctx actor.Context, w *writeDone) {
	if w.err != nil {
		a.log().Error("cannot persist a job change", "err", w.err)
	} else {
		if w.next.State != a.job.State {
			a.w.events.JobStateChanged.Publish(JobStateChanged{Job: a.job.ID, From: a.job.State, To: w.next.State,
				Chunk: a.job.Kind == persistence.KindChunk})
		}
		if persistence.SweepLeft(a.job.State, w.next) {
			ctx.Send(a.w.addr.sweeper, sweepOf(w.next, a.unfinishedChildren()))
		}
		a.job = w.next
	}
	// then runs before held messages are replayed: they must see what it did (a claimed offer's
	// assignment sent, a requeued job enqueued).
	a.held.busy = false
	if w.then != nil {
		w.then(w.err)
	}
	if !a.held.busy {
		a.held.release(func(msg any, sender *actor.PID) { a.handle(ctx, msg, sender) })
	}
	a.restartIdle(ctx)
}
