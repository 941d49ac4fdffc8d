package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
)

// Messages to a JobActor.
type (
	// offer: the scheduler reserved a slot on a node for this job.
	offer struct {
		node     *actor.PID
		nodeID   string
		queuedAt time.Time
	}
	// renderProgress, renderDone, renderFailed: a node's reports, forwarded by its NodeActor.
	renderProgress struct {
		attempt int
		node    string
		percent float64
		// log holds the lines the render wrote since its last report, logAt when (may be empty).
		log   []string
		logAt []time.Time
	}
	renderDone struct {
		attempt  int
		node     string
		duration time.Duration
		// size is the output's, in bytes (0: the node did not say).
		size int64
		// output is what the node uploaded to the farm's bucket (nil: to the coordinator, or
		// the job's own bucket).
		output *protocol.OutputReport
		log    []string
		// logAt holds when each log line was written on the node (empty: not known).
		logAt []time.Time
		// settle, when set, is the NodeActor to tell once the outcome is durable (reportSettled).
		settle *actor.PID
	}
	renderFailed struct {
		attempt   int
		node      string
		err       string
		retryable bool
		log       []string
		logAt     []time.Time
		// countless: the attempt never began (refused), was interrupted by a clean coordinator
		// restart, or the farm's storage failed it; none says anything about the job, so it
		// does not count towards Config.MaxAttempts.
		countless bool
		// farm: the farm's own storage failed it; the job waits (storageWait) before it is
		// queued again.
		farm bool
		// settle, when set, is the NodeActor to tell once the outcome is durable (reportSettled).
		settle *actor.PID
	}
	// cancelRequest asks a job to cancel itself; it answers with a cancelResult. by says who
	// asked, for the job's log ("": its log says only that it was cancelled).
	cancelRequest struct{ by string }
	cancelResult  struct {
		jobID     ulid.ULID
		cancelled bool
		// job is the job after the request (nil when it does not exist).
		job *persistence.Job
		// relatives are the parent and children to reach next in a cascade.
		relatives []ulid.ULID
	}
	// stopRequest asks a rendering job to stop; sendAgainRequest a rendering one to start
	// again, queued (an operator's); retagRequest a queued or pending one to take another
	// priority and tags (nil: as they are). Each answers a jobAnswer.
	stopRequest      struct{ by string }
	sendAgainRequest struct{ by string }
	retagRequest     struct {
		priority *int
		tags     *[]string
		by       string
	}
	jobAnswer struct {
		job *persistence.Job
		err error
	}
	// withdrawAttempt tells a NodeActor that a job no longer wants its attempt on the node.
	withdrawAttempt struct {
		jobID   ulid.ULID
		attempt int
		reason  string
	}
	// childFinished and childFailed: a child of this job reached a terminal state.
	childFinished struct{ child ulid.ULID }
	childFailed   struct {
		child  ulid.ULID
		reason string
	}
	// chunkProgress: a chunk of this split job started (0) or rendered this far.
	chunkProgress struct {
		chunk   ulid.ULID
		percent float64
	}
	// chunkProgressDue: the split job's progress, held back since its last save, is due.
	chunkProgressDue struct{}
	// relativeFailed: this job's parent failed, so this job's output is no longer wanted. A
	// sender (a sweep) is answered with relativeEnded once the job has ended.
	relativeFailed struct{ reason string }
	relativeEnded  struct{}
	// adoptionExpired: no node reclaimed the attempt the coordinator's restart interrupted.
	adoptionExpired struct{ attempt int }
	// renderAdopted: the node still rendering the attempt reclaimed it from this coordinator,
	// which started (a restart, or another replica taking the lead) while it rendered.
	renderAdopted struct {
		attempt int
		node    string
	}
	// outputConfirmed: the check that a node's upload is in the farm's bucket ended.
	outputConfirmed struct {
		done *renderDone
		err  error
	}
)

// Messages to the scheduler.
type (
	// jobsQueued: these jobs wait for a slot (one message for a whole batch). A start sends the
	// queue it restores in chunks, each but the last restoring: nothing is dispatched before the
	// whole queue is back, so pickup order holds across a restart. Restoring chunks are
	// answered when taken.
	jobsQueued struct {
		entries   []persistence.QueueEntry
		restoring bool
	}
	jobWithdrawn struct{ jobID ulid.ULID }
	// chunksWithdrawn: the chunks of a split job that ended; they are swept (sweep.go).
	chunksWithdrawn struct{ ids []ulid.ULID }
	offerClaimed    struct{ jobID ulid.ULID }
	offerDeclined   struct{ jobID ulid.ULID }
	slotFreed       struct {
		nodeID string
		jobID  ulid.ULID
	}
	// nodeReady: the node takes work; busy are the attempts it holds, by job, with their teams.
	nodeReady struct {
		nodeID      string
		pid         *actor.PID
		engines     []string
		slots       int
		requireTags []string
		pools       []string
		busy        map[ulid.ULID]ulid.ULID
	}
	// nodePaused: the node keeps what it holds but takes no new work.
	nodePaused struct {
		nodeID string
		state  NodeState
	}
	nodeGone struct{ nodeID string }
)
