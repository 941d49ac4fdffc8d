package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// CancelOutcome is the result of a cancellation and its cascade.
type CancelOutcome struct {
	// Cancelled lists every job the request cancelled, relatives included but not chunks, each
	// once: the requested jobs first in request order, then the cascaded ones in id order.
	Cancelled []*persistence.Job
	// Reached maps every job the walk reached to its state after the walk (nil: not found).
	Reached map[ulid.ULID]*persistence.Job
}

// cancelWalker cascades a cancellation over the job graph: it asks each reached job to cancel,
// and every job that did cancel leads on to its parent and children. A visited set makes each
// job asked once, so the walk ends and its answer lists each cancelled job once.
type cancelWalker struct {
	jobs      *jobDirectory
	log       *slog.Logger
	roots     []ulid.ULID
	by        string
	replyTo   *actor.PID
	visited   map[ulid.ULID]bool
	reached   map[ulid.ULID]*persistence.Job
	cancelled map[ulid.ULID]*persistence.Job
	pending   int
}

func (w *cancelWalker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		for _, id := range w.roots {
			w.visit(ctx, id)
		}
	case *cancelResult:
		w.pending--
		w.reached[m.jobID] = m.job
		if m.cancelled {
			w.cancelled[m.jobID] = m.job
			for _, rel := range m.relatives {
				w.visit(ctx, rel)
			}
		}
	default:
		return
	}
	if w.pending == 0 {
		if w.replyTo != nil {
			ctx.Send(w.replyTo, w.outcome())
		}
		ctx.Stop(ctx.Self())
	}
}

func (w *cancelWalker) visit(ctx actor.Context, id ulid.ULID) {
	if w.visited[id] {
		return
	}
	w.visited[id] = true
	err := w.jobs.deliver(id, &cancelRequest{by: w.by}, ctx.Self())
	if err != nil {
		if !errors.Is(err, persistence.ErrNotFound) {
			w.log.Error("cancel cascade cannot reach a job", "job", id.String(), "err", err)
		}
		w.reached[id] = nil
		return
	}
	w.pending++
}

func (w *cancelWalker) outcome() *CancelOutcome {
	out := &CancelOutcome{Reached: w.reached}
	for _, id := range w.roots {
		if j := w.cancelled[id]; j != nil {
			out.Cancelled = append(out.Cancelled, j)
			delete(w.cancelled, id)
		}
	}
	rest := make([]*persistence.Job, 0, len(w.cancelled))
	for _, j := range w.cancelled {
		if j.Kind != persistence.KindChunk { // the farm's, not the client's: its job tells
			rest = append(rest, j)
		}
	}
	slices.SortFunc(rest, func(a, b *persistence.Job) int { return a.ID.Compare(b.ID) })
	out.Cancelled = append(out.Cancelled, rest...)
	return out
}

// cancelWalks starts cancel walks.
type cancelWalks struct {
	root *actor.RootContext
	jobs *jobDirectory
	log  *slog.Logger
}

// start spawns a walk from the roots, asked by by (for the jobs' logs); replyTo (if any)
// receives the *CancelOutcome. The walk is
// a top-level actor, never a child of the actor asking: Proto.Actor's set of children keeps the
// last child it removed in its backing array, and through that PID's cached process a finished
// walk, with every job record it reached, would live as long as its parent (a batch's actor, two
// seconds idle after each cancel).
func (cw *cancelWalks) start(roots []ulid.ULID, by string, replyTo *actor.PID) {
	cw.root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &cancelWalker{
			jobs: cw.jobs, log: cw.log, roots: roots, by: by, replyTo: replyTo,
			visited:   make(map[ulid.ULID]bool),
			reached:   make(map[ulid.ULID]*persistence.Job),
			cancelled: make(map[ulid.ULID]*persistence.Job),
		}
	}))
}

// ErrNotRendering refuses to stop a job that is not rendering; ErrNotWaiting to change the
// priority or tags of one that is not queued or pending.
var (
	ErrNotRendering = errors.New("not rendering")
	ErrNotWaiting   = errors.New("not queued or pending")
)

// StopJob stops a rendering job (which the caller checked exists and belongs to the team); by
// says who, for its log. It answers the job once its end is durable.
func (c *Coordinator) StopJob(jobID ulid.ULID, by string) (*persistence.Job, error) {
	return c.askJob(jobID, &stopRequest{by: by})
}

// SendAgain takes a rendering job's attempt back from its node and queues it again, without
// counting it (ErrNotRendering when it does not render); by says who, for its log.
func (c *Coordinator) SendAgain(jobID ulid.ULID, by string) (*persistence.Job, error) {
	return c.askJob(jobID, &sendAgainRequest{by: by})
}

// RetagJob gives a queued or pending job (which the caller checked exists and belongs to the
// team) another priority and tags (nil: as they are); by says who, for its log. A split job's
// chunks still waiting take them too before it answers, so that the next free slot already goes
// by them.
func (c *Coordinator) RetagJob(jobID ulid.ULID, priority *int, tags *[]string, by string) (*persistence.Job, error) {
	j, err := c.askJob(jobID, &retagRequest{priority: priority, tags: tags, by: by})
	if err != nil || !j.Split() {
		return j, err
	}
	return j, c.retagChunks(j, by)
}

// retagChunks gives the chunks of split job j its priority and tags, all asked at once; a chunk
// no longer waiting keeps its own.
func (c *Coordinator) retagChunks(j *persistence.Job, by string) error {
	t, err := c.leading()
	if err != nil {
		return err
	}
	futures := make([]*actor.Future, 0, len(j.Children))
	for _, chunk := range j.Children {
		f, err := c.ask(t, chunk, &retagRequest{priority: &j.Priority, tags: &j.Tags, by: by})
		if err != nil {
			c.log.Warn("message for a job that cannot be reached", "job", chunk.String(), "err", err)
			continue
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		if _, err := answerOf(f); err != nil && !errors.Is(err, ErrNotWaiting) {
			return fmt.Errorf("the job's chunks: %w", err)
		}
	}
	return nil
}

// askJob asks a job's actor something answered with a jobAnswer.
func (c *Coordinator) askJob(jobID ulid.ULID, msg any) (*persistence.Job, error) {
	t, err := c.leading()
	if err != nil {
		return nil, err
	}
	future, err := c.ask(t, jobID, msg)
	if err != nil {
		return nil, err
	}
	return answerOf(future)
}

// ask hands msg to a job's actor of term t; its jobAnswer comes to the future returned.
func (c *Coordinator) ask(t *term, jobID ulid.ULID, msg any) (*actor.Future, error) {
	future := actor.NewFuture(t.system, c.cfg.AskTimeout)
	return future, t.jobs.deliver(jobID, msg, future.PID())
}

// answerOf waits for the jobAnswer of an ask (ErrUnavailable when none came in time).
func answerOf(future *actor.Future) (*persistence.Job, error) {
	res, err := future.Result()
	if err != nil {
		return nil, ErrUnavailable
	}
	r := res.(*jobAnswer)
	return r.job, r.err
}

// CancelJobs cancels the jobs (which the caller checked exist and belong to the team) with
// their cascades, and waits for the outcome; by says who, for the jobs' logs.
func (c *Coordinator) CancelJobs(ids []ulid.ULID, by string) (*CancelOutcome, error) {
	t, err := c.leading()
	if err != nil {
		return nil, err
	}
	future := actor.NewFuture(t.system, c.cfg.AskTimeout)
	t.walks.start(ids, by, future.PID())
	res, err := future.Result()
	if err != nil {
		return nil, ErrUnavailable
	}
	return res.(*CancelOutcome), nil
}
