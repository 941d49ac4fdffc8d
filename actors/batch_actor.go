package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// batchActor owns one batch: it creates the batch with all its jobs in one durable write, and
// cancels them through one cascade walk. Requests for the same batch are handled one at a time,
// so concurrent cancels each get an exact account of what they cancelled.
type batchActor struct {
	w     *batchWorld
	id    ulid.ULID
	entry *registryEntry

	// held keeps requests that arrive while one is in hand.
	held      holdQueue
	idle      idleTimer
	requester *actor.PID
	jobs      []persistence.BatchJob
}

// Messages to a BatchActor.
type (
	batchCreate struct {
		batch    *persistence.Batch
		jobs     []*persistence.Job
		remember *persistence.Answer
	}
	batchCreated struct {
		err  error
		jobs []*persistence.Job
	}
	batchCancel struct{ by string }
)

// BatchJobCancel is what a batch cancel did to one top-level job.
type BatchJobCancel struct {
	Index int
	JobID ulid.ULID
	// Cancelled is false when the job was skipped; Reason then says why.
	Cancelled bool
	Reason    string
	// Job is the job after the cancel (nil when it was not found).
	Job *persistence.Job
}

// BatchCancelOutcome is the result of cancelling a batch.
type BatchCancelOutcome struct {
	Jobs []BatchJobCancel
	// Cancelled lists every job cancelled, cascaded relatives included, each once.
	Cancelled []*persistence.Job
}

// Skip reasons of a batch cancel.
const (
	SkipNotFound       = "not_found"
	SkipNotCancellable = "not_cancellable"
)

// batchWorld is what every batch actor is given: its batch's jobs to read, the intake that
// stores and queues new jobs, and the cancel walks.
type batchWorld struct {
	store interface {
		BatchExists(ulid.ULID) bool
		BatchJobs(ulid.ULID) []persistence.BatchJob
	}
	intake  *intake
	walks   *cancelWalks
	batches *registry
	root    *actor.RootContext
	idle    idleRule
}

func (w *batchWorld) load(batchID ulid.ULID) (func(*registryEntry) actor.Actor, error) {
	if !w.store.BatchExists(batchID) {
		return nil, persistence.ErrNotFound
	}
	return w.producer(batchID), nil
}

func (w *batchWorld) producer(batchID ulid.ULID) func(*registryEntry) actor.Actor {
	return func(e *registryEntry) actor.Actor { return &batchActor{w: w, id: batchID, entry: e} }
}

func (b *batchActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		b.idle.reset(b.w.idle, ctx.Self())
	case *mail:
		m.received()
		if !b.held.hold(m.msg, ctx.Sender()) {
			b.handle(ctx, m.msg, ctx.Sender())
		}
	case *batchCreated:
		if m.err == nil {
			b.w.intake.start(m.jobs)
		}
		b.done(ctx, &batchCreated{err: m.err})
	case *CancelOutcome:
		b.done(ctx, b.cancelOutcome(m))
	case *idleCheck:
		if b.idle.current(m) && !b.held.busy && b.w.batches.tryPassivate(b.id, b.entry) {
			ctx.Stop(ctx.Self())
		}
	case *actor.Stopping:
		b.idle.stop()
	}
}

func (b *batchActor) handle(ctx actor.Context, msg any, sender *actor.PID) {
	b.held.busy, b.requester = true, sender
	switch m := msg.(type) {
	case *batchCreate:
		self := ctx.Self()
		b.w.intake.write(m.batch, m.jobs, m.remember, func(err error) {
			b.w.root.Send(self, &batchCreated{err: err, jobs: m.jobs})
		})
	case *batchCancel:
		b.jobs = b.w.store.BatchJobs(b.id)
		roots := make([]ulid.ULID, len(b.jobs))
		for i, j := range b.jobs {
			roots[i] = j.JobID
		}
		b.w.walks.start(roots, m.by, ctx.Self())
	default:
		b.done(ctx, errors.New("batch actor: unknown request"))
	}
}

func (b *batchActor) cancelOutcome(walk *CancelOutcome) *BatchCancelOutcome {
	cancelled := make(map[ulid.ULID]bool, len(walk.Cancelled))
	for _, j := range walk.Cancelled {
		cancelled[j.ID] = true
	}
	out := &BatchCancelOutcome{Cancelled: walk.Cancelled}
	for _, bj := range b.jobs {
		res := BatchJobCancel{Index: bj.Index, JobID: bj.JobID, Job: walk.Reached[bj.JobID], Cancelled: cancelled[bj.JobID]}
		switch {
		case res.Job == nil:
			res.Reason = SkipNotFound
		case !res.Cancelled:
			res.Reason = SkipNotCancellable
		}
		out.Jobs = append(out.Jobs, res)
	}
	return out
}

// done answers the request in hand and takes the next waiting one.
func (b *batchActor) done(ctx actor.Context, answer any) {
	if b.requester != nil {
		ctx.Send(b.requester, answer)
	}
	b.requester, b.jobs = nil, nil
	b.held.release(func(msg any, sender *actor.PID) { b.handle(ctx, msg, sender) })
	b.idle.reset(b.w.idle, ctx.Self())
}

// CreateBatch stores a batch and its jobs (children included) in one durable write and starts
// them; it returns once the write is durable. remember is as for CreateJobs.
func (c *Coordinator) CreateBatch(batch *persistence.Batch, jobs []*persistence.Job, remember *persistence.Answer) error {
	t, err := c.leading()
	if err != nil {
		return err
	}
	t.batches.activate(batch.ID, t.batchWorld.producer(batch.ID))
	res, err := t.askBatch(batch.ID, &batchCreate{batch: batch, jobs: jobs, remember: remember})
	if err != nil {
		return err
	}
	return res.(*batchCreated).err
}

// CancelBatch cancels a batch's cancellable top-level jobs with their cascades; by says who,
// for the jobs' logs.
func (c *Coordinator) CancelBatch(batchID ulid.ULID, by string) (*BatchCancelOutcome, error) {
	t, err := c.leading()
	if err != nil {
		return nil, err
	}
	res, err := t.askBatch(batchID, &batchCancel{by: by})
	if err != nil {
		return nil, err
	}
	switch r := res.(type) {
	case *BatchCancelOutcome:
		return r, nil
	case error:
		return nil, r
	}
	return nil, errors.New("batch cancel: unexpected answer")
}

func (c *term) askBatch(batchID ulid.ULID, msg any) (any, error) {
	future := actor.NewFuture(c.system, c.cfg.AskTimeout)
	if err := c.batches.deliver(batchID, msg, future.PID()); err != nil {
		return nil, err
	}
	res, err := future.Result()
	if errors.Is(err, actor.ErrTimeout) {
		return nil, ErrUnavailable
	}
	return res, err
}
