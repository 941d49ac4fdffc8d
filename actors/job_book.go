package actors

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// jobBook is every rule of one job, with no I/O of its own (as the lease book is a node's): each
// message to the job, given the time, returns the effects it decides, in order, and the jobActor
// carries them out. A change of the job's record is an effect too (jobWrite): the book adopts the
// changed job only once the actor tells it the write is durable (written), and what follows the
// write comes with it. The rules are tested without an actor system or a store
// (job_book_test.go).
type jobBook struct {
	rules jobRules
	ids   IDs
	job   *persistence.Job
	// resume is set when a coordinator restart activates the job: an attempt it finds rendering
	// was interrupted. Any other activation finds the job as its last write left it.
	resume bool

	// waitingOn holds the children a pending parent still waits for (nil: not read yet);
	// chunks, of a split job, what its chunks rendered so far.
	waitingOn map[ulid.ULID]bool
	chunks    *chunkTally
	// chunkSaveDue is set while a save of the chunks' progress is scheduled.
	chunkSaveDue bool
	// progressSavedAt is when progress was last persisted; progress is saved at most once per
	// progressInterval, state changes always.
	progressSavedAt time.Time
	// liveLog holds the log lines attempt liveAttempt reported with its progress that are not
	// saved yet: they go with its next saved progress, or before its result's own lines.
	liveLog     []string
	liveLogAt   []time.Time
	liveAttempt int
}

// jobRules are the timings and limits the book applies (Config's, and what the start found).
type jobRules struct {
	progressInterval time.Duration
	maxAttempts      int
	// storageRetry is the first wait of a job whose attempt the farm's storage failed.
	storageRetry time.Duration
	// adoptWindow, when adoptAfterRestart, is how long a node may take to reclaim an attempt
	// a restart interrupted; takeover says the restart is a failover.
	adoptAfterRestart bool
	adoptWindow       time.Duration
	takeover          bool
	// cleanRestart: the previous process shut down gracefully, so renders it interrupted do not
	// count as failed attempts.
	cleanRestart bool
	// farmUploads: nodes upload outputs to the farm's bucket, and a result is confirmed there.
	farmUploads bool
}

// The effects the job book decides beyond those of the lease book (reply, toJob, logged); the
// jobActor carries them out in the order given.
type (
	// jobWrite applies a command to the store. next is the job it leaves: the actor holds other
	// messages until it is durable, and the book adopts it then (written). A write with no next
	// (a log line, files to forget) holds nothing. then follows a durable write, failed one that
	// failed (what names the write in the error's log line).
	jobWrite struct {
		cmd          persistence.Command
		next         *persistence.Job
		what         string
		then, failed effects
	}
	// writeRefused answers the sender with the failed write's error and the job as given (nil:
	// none); only in failed, where written fills the error in.
	writeRefused struct{ job *persistence.Job }
	// toService sends a message to one of the coordinator's services.
	toService struct {
		to  service
		msg any
	}
	// toNode sends a message to the actor of a render node: pid when known, else node's.
	toNode struct {
		pid  *actor.PID
		node string
		msg  any
	}
	// settleReport tells a node's actor that the job's outcome of its result is durable (to nil:
	// nobody asked).
	settleReport struct {
		to      *actor.PID
		job     ulid.ULID
		attempt int
	}
	// cascade cancels these jobs and, in turn, their relatives (cancel.go).
	cascade struct {
		jobs []ulid.ULID
		by   string
	}
	// published is an event for the Events' subscribers.
	published struct{ event any }
	// later carries out eff once after a wait on the clock.
	later struct {
		after time.Duration
		eff   effect
	}
	// confirmUpload checks, off the actor, that a node's upload to the farm's bucket is there
	// whole, holding other messages until the answer (outputConfirmed) comes back.
	confirmUpload struct{ done *renderDone }
)

func (jobWrite) isEffect()      {}
func (writeRefused) isEffect()  {}
func (toService) isEffect()     {}
func (toNode) isEffect()        {}
func (settleReport) isEffect()  {}
func (cascade) isEffect()       {}
func (published) isEffect()     {}
func (later) isEffect()         {}
func (confirmUpload) isEffect() {}

// service names a service of the coordinator a job tells.
type service string

const (
	serviceScheduler service = "scheduler"
	serviceSweeper   service = "sweeper"
	serviceWebhooks  service = "webhooks"
)

func newJobBook(rules jobRules, ids IDs, job *persistence.Job, resume bool) *jobBook {
	return &jobBook{rules: rules, ids: ids, job: job, resume: resume}
}

// on decides what a message to the job does. Reports come with the job's secrets already hidden,
// child news once the children are known (childrenUnknown), an adoption's expiry once the actor
// found the attempt unclaimed.
func (b *jobBook) on(now time.Time, msg any) effects {
	var out effects
	switch m := msg.(type) {
	case *offer:
		b.onOffer(&out, now, m)
	case *renderProgress:
		b.onProgress(&out, now, m)
	case *renderDone:
		b.onDone(&out, now, m)
	case *renderFailed:
		b.onFailed(&out, now, m)
	case *cancelRequest:
		b.onCancel(&out, now, m.by)
	case *stopRequest:
		b.onStop(&out, now, m)
	case *sendAgainRequest:
		b.onSendAgain(&out, now, m)
	case *retagRequest:
		b.onRetag(&out, now, m)
	case *childFinished:
		b.onChildFinished(&out, now, m)
	case *childFailed:
		b.onChildFailed(&out, now, m)
	case *chunkProgress:
		b.onChunkProgress(&out, now, m)
	case *chunkProgressDue:
		b.chunkSaveDue = false
		if b.job.State == persistence.JobPending && b.chunks != nil {
			b.saveChunkProgress(&out, now)
		}
	case *relativeFailed:
		// A sweep asking waits for the answer; a parent telling does not (reply goes nowhere).
		ended := effects{reply{&relativeEnded{}}}
		if b.chunkRendering() {
			b.withdraw(&out, now, b.job.Clone(), m.reason, ended, ended)
			break
		}
		b.failWaiting(&out, now, EventRelativeFailed, m.reason, nil, ended)
	case *adoptionExpired:
		if b.job.State == persistence.JobRendering && b.job.Attempts == m.attempt {
			b.restartLost(&out, now)
		}
	case *renderAdopted:
		b.onAdopted(&out, now, m)
	case *outputConfirmed:
		b.onOutputConfirmed(&out, now, m)
	default:
		out.log(slog.LevelWarn, "job actor ignored an unknown message", "type", fmt.Sprintf("%T", msg))
	}
	return out
}

// onStart takes the job up when its actor starts: after a restart, a rendering job's attempt was
// interrupted. Its node may still hold it and reclaim it when it reconnects (within the adopt
// window); otherwise the job goes back to the queue. A pending parent's children are read first
// (readsChildrenAtStart).
func (b *jobBook) onStart(now time.Time) effects {
	var out effects
	if b.job.State != persistence.JobRendering || !b.resume {
		return out
	}
	if b.rules.adoptAfterRestart {
		out.add(later{b.rules.adoptWindow, toJob{job: b.job.ID, msg: &adoptionExpired{attempt: b.job.Attempts}}})
	} else {
		b.restartLost(&out, now)
	}
	return out
}

// readsChildrenAtStart reports whether a starting actor reads its job's children at once: a
// pending parent's, to act on any that ended while it had no actor. A split job's chunks,
// thousands maybe, wait until a message needs them (its cancel does not), unless a restart
// may have cut short what they did.
func (b *jobBook) readsChildrenAtStart() bool {
	return b.job.State == persistence.JobPending && (b.resume || !b.job.Split())
}

// childrenUnknown reports whether a pending parent has yet to read its children.
func (b *jobBook) childrenUnknown() bool {
	return b.waitingOn == nil && b.job.State == persistence.JobPending
}

// onChildren takes in a pending parent's children as the store holds them (err: they cannot be
// read) and acts on what they already did.
func (b *jobBook) onChildren(now time.Time, children []*persistence.Job, err error) effects {
	var out effects
	b.waitingOn = make(map[ulid.ULID]bool)
	var failed, cancelled *persistence.Job
	for i, child := range children {
		switch {
		case err != nil:
		case child == nil:
			err = fmt.Errorf("child %s: %w", b.job.Children[i], persistence.ErrNotFound)
		case child.State == persistence.JobFinished:
		case child.State == persistence.JobFailed:
			failed = child
		case child.State == persistence.JobCancelled:
			cancelled = child
		default:
			b.waitingOn[child.ID] = true
		}
	}
	if err == nil && b.job.Split() {
		b.chunks = newChunkTally(children)
	}
	switch {
	case err != nil:
		out.log(slog.LevelError, "cannot load the children of a pending job", "err", err)
	case failed != nil:
		b.onChildFailed(&out, now, &childFailed{child: failed.ID, reason: failed.Error})
	case cancelled != nil:
		// A cancel cascade reached a child and goes on to this parent. After a restart it may
		// have been cut short: finish it from here. Otherwise the cascade in flight arrives
		// itself (a second walk would race it for the jobs its answer lists).
		if b.resume {
			out.add(cascade{jobs: []ulid.ULID{b.job.ID}})
		}
	case len(b.waitingOn) == 0:
		b.childrenFinished(&out, now)
	}
	return out
}

// written adopts a durable write's job and returns what follows it; a failed write changes
// nothing, and what follows it is failed's.
func (b *jobBook) written(w jobWrite, err error) effects {
	var out effects
	if err != nil {
		for _, e := range w.failed {
			if r, ok := e.(writeRefused); ok {
				e = reply{&jobAnswer{job: r.job, err: err}}
			}
			out.add(e)
		}
		return out
	}
	if w.next.State != b.job.State {
		out.add(published{JobStateChanged{Job: b.job.ID, From: b.job.State, To: w.next.State, Chunk: b.job.Kind == persistence.KindChunk}})
	}
	if persistence.SweepLeft(b.job.State, w.next) {
		out.add(toService{serviceSweeper, sweepOf(w.next, b.unfinishedChildren())})
	}
	b.job = w.next
	return append(out, w.then...)
}

// restartLost queues again a job whose attempt the coordinator's restart, or a failover,
// interrupted: no node reclaimed it (within the adopt window, when there is one).
func (b *jobBook) restartLost(out *effects, now time.Time) {
	if len(b.job.Limits) > 0 {
		out.add(toService{serviceScheduler, &limitsReleased{job: b.job.ID}})
	}
	why := "the coordinator restarted during the render"
	switch {
	case b.rules.takeover:
		why = fmt.Sprintf("another replica took over the farm during the render (a failover), and node %s did not reclaim the attempt within %s (cut off, or gone)",
			b.job.Node, b.rules.adoptWindow)
	case b.rules.adoptAfterRestart:
		why = fmt.Sprintf("the coordinator restarted during the render, and node %s did not reclaim the attempt within %s", b.job.Node, b.rules.adoptWindow)
	}
	b.onFailed(out, now, &renderFailed{
		attempt:   b.job.Attempts,
		node:      b.job.Node,
		err:       why,
		retryable: true,
		countless: b.rules.cleanRestart || b.rules.takeover,
	})
}

// onAdopted says in the job's log that its render went on across the coordinator's restart or a
// failover, rather than start again.
func (b *jobBook) onAdopted(out *effects, now time.Time, m *renderAdopted) {
	if b.job.State != persistence.JobRendering || b.job.Attempts != m.attempt {
		return
	}
	across := "the coordinator's restart"
	if b.rules.takeover {
		across = "a failover (another replica leads the farm now)"
	}
	line := fmt.Sprintf("attempt %d on node %s carried on across %s: the render goes on, reporting to the new coordinator", m.attempt, m.node, across)
	out.add(jobWrite{cmd: &persistence.AppendJobLog{At: now, JobID: b.job.ID, Lines: []string{line}}, what: "an adoption in the job's log"})
}

func (b *jobBook) onOffer(out *effects, now time.Time, o *offer) {
	declined := toService{serviceScheduler, &offerDeclined{jobID: b.job.ID}}
	if b.job.State != persistence.JobQueued {
		out.add(declined)
		return
	}
	next := b.job.Clone()
	next.Attempts++
	next.Node = o.nodeID
	next.StorageRetryAt = time.Time{}
	next.AttemptStartedAt = now
	if !b.job.Split() || next.StartedAt.IsZero() { // a split job started with its first chunk
		next.StartedAt = now
	}
	next.Progress = b.startingProgress()
	then := effects{toService{serviceScheduler, &offerClaimed{jobID: b.job.ID}}, toNode{pid: o.node, msg: &assign{job: next, queuedAt: o.queuedAt}}}
	b.tellChunkProgress(&then, 0)
	line := fmt.Sprintf("dispatched to node %s (attempt %d)", o.nodeID, next.Attempts)
	b.change(out, now, next, EventDispatched, []string{line}, nil, then, effects{declined})
}

// current reports whether a node's report belongs to the attempt now rendering, from the node it
// was given to; anything else is a stale attempt (or another node's) and is rejected. A rejected
// result is recorded in the job's log, and its node told (settle) once that is durable.
func (b *jobBook) current(out *effects, now time.Time, attempt int, what, node string, settle *actor.PID) bool {
	rendering := b.job.State == persistence.JobRendering && attempt == b.job.Attempts
	if rendering && node == b.job.Node {
		return true
	}
	out.log(slog.LevelWarn, "rejected a report from a stale attempt", "report", what, "attempt", attempt, "node", node,
		"current_attempt", b.job.Attempts, "attempt_node", b.job.Node, "state", b.job.State.String())
	stale := published{StaleReport{Job: b.job.ID, Attempt: attempt, What: what}}
	if what == "progress" {
		out.add(stale)
		return false
	}
	line := fmt.Sprintf("rejected the %s report of attempt %d from node %s: the job is %s at attempt %d",
		what, attempt, node, b.job.State, b.job.Attempts)
	if rendering {
		line = fmt.Sprintf("rejected the %s report of attempt %d from node %s: the attempt renders on node %s", what, attempt, node, b.job.Node)
	}
	out.add(jobWrite{cmd: &persistence.AppendJobLog{At: now, JobID: b.job.ID, Lines: []string{line}}, what: "a rejected report",
		then: effects{settleReport{settle, b.job.ID, attempt}, stale}, failed: effects{stale}})
	return false
}

// repeated reports whether a result is one this job already took from its node: the node sent
// it again before hearing that it was settled. It is settled again, and changes nothing.
func (b *jobBook) repeated(attempt int, node string, done bool, failure string) bool {
	if attempt != b.job.Attempts || node != b.job.Node {
		return false
	}
	if done {
		return b.job.State == persistence.JobFinished
	}
	return slices.ContainsFunc(b.job.Failures, func(f persistence.AttemptFailure) bool {
		return f.Attempt == attempt && f.Node == node && f.Error == failure
	})
}

func (b *jobBook) onProgress(out *effects, now time.Time, p *renderProgress) {
	if !b.current(out, now, p.attempt, "progress", p.node, nil) {
		return
	}
	b.keepLiveLog(p.attempt, p.log, p.logAt)
	percent := min(max(p.percent, 0), 100)
	b.tellChunkProgress(out, percent)
	if b.job.Split() { // the join, after the chunks
		percent = chunksShare + percent*(100-chunksShare)/100
	}
	if now.Sub(b.progressSavedAt) < b.rules.progressInterval {
		b.job = b.job.WithProgress(percent)
		return
	}
	b.progressSavedAt = now
	log, logAt := b.takeLiveLog(p.attempt, nil, nil)
	b.save(out, now, b.job.WithProgress(percent), log, logAt, nil)
}

// keepLiveLog holds lines an attempt reported with its progress until they are saved.
func (b *jobBook) keepLiveLog(attempt int, lines []string, at []time.Time) {
	if len(lines) == 0 {
		return
	}
	if attempt != b.liveAttempt {
		b.liveLog, b.liveLogAt, b.liveAttempt = nil, nil, attempt
	}
	if len(at) != len(lines) {
		at = make([]time.Time, len(lines)) // not known: they take the time they are saved
	}
	room := persistence.MaxLogLines - len(b.liveLog) // the job's log keeps no more anyway
	if room < len(lines) {
		lines, at = lines[:max(room, 0)], at[:max(room, 0)]
	}
	b.liveLog, b.liveLogAt = append(b.liveLog, lines...), append(b.liveLogAt, at...)
}

// takeLiveLog returns an attempt's unsaved live lines followed by log (whose times, logAt, may
// be fewer than its lines), and forgets them.
func (b *jobBook) takeLiveLog(attempt int, log []string, logAt []time.Time) ([]string, []time.Time) {
	if attempt != b.liveAttempt || len(b.liveLog) == 0 {
		return log, logAt
	}
	lines := append(b.liveLog, log...)
	at := append(b.liveLogAt, logAt...)
	// Lines of log without a time take the zero time, which the write reads as its own.
	at = append(at, make([]time.Time, max(len(lines)-len(at), 0))...)
	b.liveLog, b.liveLogAt = nil, nil
	return lines, at
}

func (b *jobBook) onDone(out *effects, now time.Time, d *renderDone) {
	if b.repeated(d.attempt, d.node, true, "") {
		out.add(settleReport{d.settle, b.job.ID, d.attempt})
		return
	}
	if !b.current(out, now, d.attempt, "done", d.node, d.settle) {
		return
	}
	d.log, d.logAt = b.takeLiveLog(d.attempt, d.log, d.logAt)
	if d.output != nil || (b.rules.farmUploads && b.job.OutputInFarm()) {
		// No job is finished without its output.
		out.add(confirmUpload{d})
		return
	}
	b.finish(out, now, d)
}

func (b *jobBook) onOutputConfirmed(out *effects, now time.Time, m *outputConfirmed) {
	d := m.done
	if m.err == nil {
		b.finish(out, now, d)
		return
	}
	b.onFailed(out, now, &renderFailed{attempt: d.attempt, node: d.node, retryable: true, countless: true, farm: true,
		err: "the output is not in the object store: " + m.err.Error(), log: d.log, logAt: d.logAt, settle: d.settle})
}

// finish records the render of the attempt now rendering as the job's output.
func (b *jobBook) finish(out *effects, now time.Time, d *renderDone) {
	log := append(slices.Clip(d.log), fmt.Sprintf("finished on node %s in %s", d.node, d.duration.Round(time.Millisecond)))
	took := d.duration
	if b.job.Split() && !b.job.StartedAt.IsZero() {
		// A split job's render is its chunks' and its join's: from its first chunk's start.
		took = now.Sub(b.job.StartedAt)
		log = append(log, fmt.Sprintf("the split render took %s from its first chunk's start to the end of its join", took.Round(time.Millisecond)))
	}
	next := b.job.Clone()
	next.Progress = 100
	next.FinishedAt = now
	next.RenderDuration = took
	next.OutputBytes = d.size
	then := effects{settleReport{d.settle, b.job.ID, d.attempt}, published{RenderFinished{Engine: b.job.Engine, Took: d.duration}}}
	b.finished(&then, now, next)
	b.change(out, now, next, EventRenderFinished, log, d.logAt, then, nil)
}

// finished tells whom a finished job concerns: its parent, after the parent's log says which node
// rendered a chunk's frames; and a split job's chunks are deleted, its output holding them now.
func (b *jobBook) finished(out *effects, now time.Time, j *persistence.Job) {
	told := toJob{job: j.ParentID, msg: &childFinished{child: j.ID}}
	if j.Kind == persistence.KindChunk {
		f := j.Spec.Settings.Frames
		line := fmt.Sprintf("frames %d to %d rendered on node %s in %s (attempt %d)", f.Start, f.End, j.Node,
			j.RenderDuration.Round(time.Millisecond), j.Attempts)
		out.add(jobWrite{cmd: &persistence.AppendJobLog{At: now, JobID: j.ParentID, Lines: []string{line}},
			what: "a chunk's render in its job's log", then: effects{told}, failed: effects{told}})
		return
	}
	b.notifyParent(out, told.msg)
	if !j.Split() {
		return
	}
	keys := make([]string, len(j.Children))
	for i, id := range j.Children {
		keys[i] = (&persistence.Job{ID: id}).OutputsToForget()
	}
	forget(out, keys...)
}

// forget queues the objects under the keys for deletion.
func forget(out *effects, keys ...string) {
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "" })
	if len(keys) > 0 {
		out.add(jobWrite{cmd: &persistence.ForgetObjects{Keys: keys}, what: "a job's files for deletion"})
	}
}

func (b *jobBook) onFailed(out *effects, now time.Time, f *renderFailed) {
	if b.repeated(f.attempt, f.node, false, f.err) {
		out.add(settleReport{f.settle, b.job.ID, f.attempt})
		return
	}
	if !b.current(out, now, f.attempt, "failure", f.node, f.settle) {
		return
	}
	f.log, f.logAt = b.takeLiveLog(f.attempt, f.log, f.logAt)
	failures := b.job.Failures
	if !f.countless {
		failures = append(slices.Clone(failures), persistence.AttemptFailure{Attempt: f.attempt, Node: f.node, Error: f.err, At: now})
	}
	log := append(slices.Clip(f.log), fmt.Sprintf("attempt %d on node %s ended: %s", f.attempt, f.node, f.err))
	next := b.job.Clone()
	next.Failures = failures
	settled := settleReport{f.settle, b.job.ID, f.attempt}
	if f.retryable && len(failures) < b.rules.maxAttempts {
		next.Progress = b.startingProgress()
		requeued := "queued again"
		queue := effect(toService{serviceScheduler, &jobsQueued{entries: []persistence.QueueEntry{next.QueueEntry()}}})
		if f.farm {
			// The storage may answer again by then; a job withdrawn meanwhile declines its offer.
			wait := storageWait(b.rules.storageRetry, b.job.Attempts-len(failures))
			requeued = fmt.Sprintf("the farm's storage failed the attempt, which does not count: queued again in %s", wait)
			next.StorageRetryAt = now.Add(wait)
			queue = later{wait, queue}
		}
		b.change(out, now, next, EventAttemptLost, append(log, requeued), f.logAt,
			effects{settled, published{JobRequeued{Job: b.job.ID}}, queue}, nil)
		return
	}
	next.Error = f.err
	if f.retryable {
		next.Error = attemptsMessage(failures)
	}
	next.ErrorAt = now
	then := effects{settled}
	b.notifyParent(&then, &childFailed{child: b.job.ID, reason: next.Error})
	b.change(out, now, next, EventRenderFailed, log, f.logAt, then, nil)
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

// onCancel cancels a queued or pending job; a chunk rendering is stopped, as its job no longer
// wants it. The answer names the relatives a cascade reaches next.
func (b *jobBook) onCancel(out *effects, now time.Time, by string) {
	notCancelled := effects{reply{&cancelResult{jobID: b.job.ID, job: b.job}}}
	if b.chunkRendering() {
		next, relatives := b.job.Clone(), b.relatives()
		done := reply{&cancelResult{jobID: b.job.ID, job: next, cancelled: true, relatives: relatives}}
		refused := reply{&cancelResult{jobID: b.job.ID, job: b.job, relatives: relatives}}
		b.withdraw(out, now, next, "its job was cancelled", b.inJobsLog(now, "stopped: the job was cancelled", effects{done}), effects{refused})
		return
	}
	if !b.job.State.Cancellable() {
		out.add(notCancelled...)
		return
	}
	next, then := b.job.Clone(), effects{}
	if b.job.State == persistence.JobQueued {
		then.add(toService{serviceScheduler, &jobWithdrawn{jobID: b.job.ID}})
	}
	then.add(reply{&cancelResult{jobID: b.job.ID, job: next, cancelled: true, relatives: b.relatives()}})
	next.Error, next.ErrorAt = "cancelled through the API", now
	line := "cancelled"
	if by != "" {
		line = "cancelled by " + by
	}
	b.change(out, now, next, EventCancel, []string{line}, nil, then, notCancelled)
}

// onStop ends a rendering job as cancelled by its owner (withdraw), and its relatives are
// cancelled as a cancel's cascade would.
func (b *jobBook) onStop(out *effects, now time.Time, m *stopRequest) {
	if b.job.State != persistence.JobRendering {
		out.add(reply{&jobAnswer{job: b.job, err: fmt.Errorf("%w: the job is %s, not rendering", ErrNotRendering, b.job.State)}})
		return
	}
	next, then := b.job.Clone(), effects{}
	if rel := b.relatives(); len(rel) > 0 {
		then.add(cascade{jobs: rel, by: m.by})
	}
	then.add(reply{&jobAnswer{job: next}})
	b.withdraw(out, now, next, "stopped by "+m.by, then, effects{writeRefused{}})
}

// onSendAgain takes a rendering job's attempt back from its node and queues the job again, as a
// lost attempt that does not count: an operator moving a render stuck on a slow node.
func (b *jobBook) onSendAgain(out *effects, now time.Time, m *sendAgainRequest) {
	if b.job.State != persistence.JobRendering {
		out.add(reply{&jobAnswer{job: b.job, err: fmt.Errorf("%w: it is %s; only a rendering job is sent again", ErrNotRendering, b.job.State)}})
		return
	}
	attempt, node := b.job.Attempts, b.job.Node
	line := fmt.Sprintf("attempt %d on node %s taken back by %s: queued again (it does not count against the attempts)", attempt, node, m.by)
	next := b.job.Clone()
	next.Progress = b.startingProgress()
	then := append(effects{b.takeBack(attempt, node, "sent again by "+m.by), published{JobRequeued{Job: b.job.ID}},
		toService{serviceScheduler, &jobsQueued{entries: []persistence.QueueEntry{next.QueueEntry()}}}},
		b.inJobsLog(now, "taken back by "+m.by+": queued again, not counted against the attempts", effects{reply{&jobAnswer{job: next}}})...)
	b.change(out, now, next, EventAttemptLost, []string{line}, nil, then, effects{writeRefused{}})
}

// inJobsLog says in a chunk's split job's log what became of the chunk's attempt on its node,
// then follows; for any other job it is then alone.
func (b *jobBook) inJobsLog(now time.Time, what string, then effects) effects {
	if b.job.Kind != persistence.KindChunk {
		return then
	}
	f := b.job.Spec.Settings.Frames
	line := fmt.Sprintf("frames %d to %d: attempt %d on node %s %s", f.Start, f.End, b.job.Attempts, b.job.Node, what)
	return effects{jobWrite{cmd: &persistence.AppendJobLog{At: now, JobID: b.job.ParentID, Lines: []string{line}},
		what: "a chunk's attempt in its job's log", then: then, failed: then}}
}

// withdraw ends the job's render as cancelled (the stop event) for reason, into next (a copy of
// the job the caller's effects may hold): once that is durable, the node is told to abandon the
// attempt (its slot comes back) and what the attempt may have stored is forgotten; then follows.
func (b *jobBook) withdraw(out *effects, now time.Time, next *persistence.Job, reason string, then, failed effects) {
	attempt, node := b.job.Attempts, b.job.Node
	first := effects{b.takeBack(attempt, node, reason)}
	forget(&first, b.job.OutputsToForget())
	next.Error, next.ErrorAt = reason, now
	b.change(out, now, next, EventStop, []string{fmt.Sprintf("%s while rendering on node %s (attempt %d)", reason, node, attempt)}, nil,
		append(first, then...), failed)
}

// takeBack tells the node an attempt it renders is no longer wanted (its slot comes back).
func (b *jobBook) takeBack(attempt int, node, reason string) effect {
	return toNode{node: node, msg: &withdrawAttempt{jobID: b.job.ID, attempt: attempt, reason: reason}}
}

// onRetag gives a queued or pending job another priority and tags; a queued one takes its new
// place in the scheduler's queue once that is durable (a split job's chunks are retagged by
// Coordinator.RetagJob).
func (b *jobBook) onRetag(out *effects, now time.Time, m *retagRequest) {
	if !b.job.State.Cancellable() {
		out.add(reply{&jobAnswer{job: b.job, err: fmt.Errorf("%w: the job is %s", ErrNotWaiting, b.job.State)}})
		return
	}
	next := b.job.Clone()
	if m.priority != nil {
		next.Priority = *m.priority
	}
	if m.tags != nil {
		next.Tags = *m.tags
	}
	var then effects
	if next.State == persistence.JobQueued {
		then.add(toService{serviceScheduler, &jobWithdrawn{jobID: b.job.ID}},
			toService{serviceScheduler, &jobsQueued{entries: []persistence.QueueEntry{next.QueueEntry()}}})
	}
	then.add(reply{&jobAnswer{job: next}})
	line := fmt.Sprintf("priority %d and tags [%s] set by %s", next.Priority, strings.Join(next.Tags, ","), m.by)
	out.add(jobWrite{cmd: &persistence.RetagJob{At: now, JobID: b.job.ID, Priority: next.Priority, Tags: next.Tags, Line: line},
		next: next, what: "a retag", then: then, failed: effects{writeRefused{job: b.job}}})
}

func (b *jobBook) relatives() []ulid.ULID {
	rel := slices.Clone(b.walkedChildren())
	if b.job.ParentID != (ulid.ULID{}) {
		rel = append(rel, b.job.ParentID)
	}
	return rel
}

// walkedChildren are the children a cascade reaches one by one; a split job's chunks, which may
// be thousands, are swept in the background instead (sweep.go).
func (b *jobBook) walkedChildren() []ulid.ULID {
	if b.job.Split() {
		return nil
	}
	return b.job.Children
}

// unfinishedChildren are the children a pending parent still waits for, in order: all of them
// when it has not read them.
func (b *jobBook) unfinishedChildren() []ulid.ULID {
	if b.waitingOn == nil {
		return b.job.Children
	}
	var out []ulid.ULID
	for _, id := range b.job.Children {
		if b.waitingOn[id] {
			out = append(out, id)
		}
	}
	return out
}

func (b *jobBook) onChildFinished(out *effects, now time.Time, m *childFinished) {
	if b.job.State != persistence.JobPending || !b.waitingOn[m.child] {
		return
	}
	delete(b.waitingOn, m.child)
	switch {
	case len(b.waitingOn) == 0:
		b.childrenFinished(out, now)
	case b.chunks != nil:
		b.chunks.set(m.child, 100)
		b.saveChunkProgress(out, now)
	}
}

func (b *jobBook) childrenFinished(out *effects, now time.Time) {
	line := fmt.Sprintf("all %d child jobs finished; their outputs go into this job", len(b.job.Children))
	if b.job.Split() {
		line = fmt.Sprintf("all %d chunks rendered; queued to join them", len(b.job.Children))
	}
	next := b.job.Clone()
	next.Progress = b.startingProgress()
	b.change(out, now, next, EventChildrenFinished, []string{line}, nil,
		effects{toService{serviceScheduler, &jobsQueued{entries: []persistence.QueueEntry{next.QueueEntry()}}}}, nil)
}

// startingProgress is a job's progress when its render starts: a split job's chunks are done.
func (b *jobBook) startingProgress() float64 {
	if b.job.Split() {
		return chunksShare
	}
	return 0
}

// onChunkProgress takes in how far one chunk of this split job rendered. The job's progress is
// saved at once when its first chunk starts (its client sees it rendering from then on), then at
// most once per progressInterval, the last news of an interval saved at its end.
func (b *jobBook) onChunkProgress(out *effects, now time.Time, m *chunkProgress) {
	if b.job.State != persistence.JobPending || b.chunks == nil || !b.chunks.set(m.chunk, m.percent) {
		return
	}
	wait := b.rules.progressInterval - now.Sub(b.progressSavedAt)
	switch {
	case b.job.StartedAt.IsZero() || wait <= 0:
		b.saveChunkProgress(out, now)
	case !b.chunkSaveDue:
		b.chunkSaveDue = true
		out.add(later{wait, toJob{job: b.job.ID, msg: &chunkProgressDue{}}})
	}
}

func (b *jobBook) saveChunkProgress(out *effects, now time.Time) {
	b.progressSavedAt = now
	next := b.job.WithProgress(b.chunks.progress())
	if next.StartedAt.IsZero() {
		next.StartedAt = now
	}
	b.save(out, now, next, nil, nil, nil)
}

// save writes the job's progress (next, in the same state) with log lines; its subscribers hear
// of it once durable.
func (b *jobBook) save(out *effects, now time.Time, next *persistence.Job, log []string, logAt []time.Time, failed effects) {
	out.add(jobWrite{cmd: &persistence.ChangeJob{At: now, Prev: b.job.State, Job: next, Log: log, LogAt: logAt}, next: next,
		what: "the job's progress", then: effects{published{JobProgressSaved{Job: b.job.ID, Percent: next.Progress}}}, failed: failed})
}

// tellChunkProgress tells a chunk's job how far the chunk rendered.
func (b *jobBook) tellChunkProgress(out *effects, percent float64) {
	if b.job.Kind == persistence.KindChunk {
		out.add(toJob{job: b.job.ParentID, msg: &chunkProgress{chunk: b.job.ID, percent: percent}})
	}
}

// chunkRendering reports whether this is a chunk rendering: the job it belongs to no longer wants
// it once cancelled or failed, so it stops at once rather than render for nothing.
func (b *jobBook) chunkRendering() bool {
	return b.job.Kind == persistence.KindChunk && b.job.State == persistence.JobRendering
}

func (b *jobBook) onChildFailed(out *effects, now time.Time, m *childFailed) {
	reason := fmt.Sprintf("child job %s failed: %s", m.child, m.reason)
	if b.chunks != nil {
		reason = fmt.Sprintf("%s failed: %s", b.chunks.describe(m.child), m.reason)
	}
	b.failWaiting(out, now, EventChildFailed, reason, &m.child, nil)
}

// failWaiting fails a queued or pending job because a relative failed, then passes the failure
// on: up to its parent (unless the parent caused it) and down to its other children. ended
// follows once the job has ended, or when it cannot.
func (b *jobBook) failWaiting(out *effects, now time.Time, ev JobEvent, reason string, failedChild *ulid.ULID, ended effects) {
	if !b.job.State.Cancellable() {
		out.add(ended...)
		return
	}
	var then effects
	if b.job.State == persistence.JobQueued {
		then.add(toService{serviceScheduler, &jobWithdrawn{jobID: b.job.ID}})
	}
	for _, childID := range b.walkedChildren() {
		if failedChild == nil || childID != *failedChild {
			then.add(toJob{job: childID, msg: &relativeFailed{reason: fmt.Sprintf("parent job %s failed: %s", b.job.ID, reason)}})
		}
	}
	if ev == EventChildFailed {
		b.notifyParent(&then, &childFailed{child: b.job.ID, reason: reason})
	}
	next := b.job.Clone()
	next.Error, next.ErrorAt = reason, now
	b.change(out, now, next, ev, []string{reason}, nil, append(then, ended...), ended)
}

func (b *jobBook) notifyParent(out *effects, msg any) {
	if b.job.ParentID != (ulid.ULID{}) {
		out.add(toJob{job: b.job.ParentID, msg: msg})
	}
}

// change applies ev to next (a copy of the job the caller edited), and writes it with the log
// lines (logAt: the times of the first, a node's, written while it rendered); a job that ends
// with a webhook queues its delivery in the same write, and the webhook dispatcher hears of it
// once durable. An event the state machine refuses writes nothing: it is logged, and failed
// follows at once.
func (b *jobBook) change(out *effects, now time.Time, next *persistence.Job, ev JobEvent, log []string, logAt []time.Time,
	then, failed effects) {
	if err := applyJobEvent(next, ev); err != nil {
		out.log(slog.LevelError, "refused a state change", "err", err)
		out.add(failed...)
		return
	}
	var delivery *persistence.Delivery
	if next.State.Terminal() && next.Spec.Webhook != nil {
		delivery = &persistence.Delivery{ID: b.ids.New(now), JobID: next.ID, TeamID: next.TeamID, NextAt: now, CreatedAt: now}
		then = append(effects{toService{serviceWebhooks, &deliveryQueued{delivery: delivery}}}, then...)
	}
	out.add(jobWrite{cmd: &persistence.ChangeJob{At: now, Prev: b.job.State, Job: next, Log: log, LogAt: logAt, Delivery: delivery},
		next: next, what: "a job change", then: then, failed: failed})
}
