package actors

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// sweepStep is how many chunks the sweeper asks at once, for all the farm's sweeps together:
// the store's queue holds at most this many of its writes, so other teams' work waits on a
// small write at most.
const sweepStep = 4

// sweepChunks asks the sweeper to end the chunks of a split job that ended before them
// (cancelled, stopped, or failed by one of them). The job's answer does not wait for them: there
// may be thousands (persistence/sweeps.go).
type sweepChunks struct {
	job    ulid.ULID
	chunks []ulid.ULID
	// failed says the job failed (its chunks fail as its relatives, with reason) rather than
	// being cancelled or stopped (its chunks are cancelled).
	failed bool
	reason string
}

// sweeper ends the chunks of split jobs that ended, one farm-wide step of sweepStep chunks at
// a time, each step once the last was answered, the sweeps in the order they came. The
// scheduler forgets a sweep's chunks as soon as it arrives, so none starts while it waits. The
// store's record of a sweep is removed when it is over.
type sweeper struct {
	jobs      *jobDirectory
	store     jobStore
	scheduler *actor.PID
	log       *slog.Logger
	sweeps    []*sweepChunks
	// next is the first chunk of sweeps[0] not asked yet; pending how many of the step asked
	// are not answered; closing the sweeps all asked, over once the step is answered.
	next    int
	pending int
	closing []ulid.ULID
}

func (s *sweeper) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *sweepChunks:
		ctx.Send(s.scheduler, &chunksWithdrawn{ids: m.chunks})
		s.sweeps = append(s.sweeps, m)
	case *cancelResult, *relativeEnded:
		s.pending--
	default:
		return
	}
	for s.pending == 0 {
		s.closeAnswered()
		if len(s.sweeps) == 0 {
			return
		}
		sweep := s.sweeps[0]
		end := min(s.next+sweepStep, len(sweep.chunks))
		for _, id := range sweep.chunks[s.next:end] {
			s.ask(ctx, sweep, id)
		}
		if s.next = end; s.next == len(sweep.chunks) {
			s.closing = append(s.closing, sweep.job)
			s.sweeps[0] = nil
			s.sweeps, s.next = s.sweeps[1:], 0
		}
	}
}

// ask tells one chunk its job ended; a chunk gone (its job deleted) needs nothing.
func (s *sweeper) ask(ctx actor.Context, sweep *sweepChunks, chunk ulid.ULID) {
	var msg any = &cancelRequest{}
	if sweep.failed {
		msg = &relativeFailed{reason: sweep.reason}
	}
	if err := s.jobs.deliver(chunk, msg, ctx.Self()); err != nil {
		if !errors.Is(err, persistence.ErrNotFound) {
			s.log.Error("a sweep cannot reach a chunk", "job", sweep.job.String(), "chunk", chunk.String(), "err", err)
		}
		return
	}
	s.pending++
}

// closeAnswered removes the store's records of the sweeps whose chunks were all asked and
// answered (a chunk answers once its end is written).
func (s *sweeper) closeAnswered() {
	for _, job := range s.closing {
		s.store.ApplyAsync(&persistence.SetMeta{Name: persistence.SweepKey(job), Value: ""}, func(err error) {
			if err != nil {
				s.log.Warn("cannot record the end of a sweep of chunks: the next start sweeps them again", "job", job.String(), "err", err)
			}
		})
	}
	s.closing = s.closing[:0]
}

// sweepOf is the sweep of the chunks of a split job that ended (as it is now durably).
func sweepOf(job *persistence.Job, chunks []ulid.ULID) *sweepChunks {
	sweep := &sweepChunks{job: job.ID, chunks: chunks, failed: job.State == persistence.JobFailed}
	if sweep.failed {
		sweep.reason = fmt.Sprintf("parent job %s failed: %s", job.ID, job.Error)
	}
	return sweep
}

// resumeSweeps hands the sweeper the sweeps a restart or a change of leader cut short, as the
// store records them.
func resumeSweeps(store Store, root *actor.RootContext, sweeper *actor.PID) {
	for name := range store.MetaPrefixed(persistence.SweepPrefix) {
		id, err := ulid.ParseStrict(name)
		if err != nil {
			continue
		}
		job, err := store.Job(id)
		if err != nil || !persistence.SweepLeft(persistence.JobPending, job) {
			// Deleted meanwhile: nothing is left to end.
			store.ApplyAsync(&persistence.SetMeta{Name: persistence.SweepKey(id), Value: ""}, func(error) {})
			continue
		}
		root.Send(sweeper, sweepOf(job, job.Children))
	}
}
