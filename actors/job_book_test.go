package actors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// The job book's rules, one table row a case: each case feeds a book made from a stored job a
// sequence of messages at times on a made-up clock and checks the effects of each (logs left
// out) and the job's state after it. A write of the job's record is made durable at once, its
// following effects written after it with "> " (or, failWrite, refused). No actor, store or
// network.

var errDiskFull = errors.New("disk full")

func jobRulesForTest() jobRules {
	return jobRules{progressInterval: time.Second, maxAttempts: 3, storageRetry: 10 * time.Second, adoptWindow: 30 * time.Second}
}

// bookIDs gives every delivery the same made-up id.
type bookIDs struct{}

func (bookIDs) New(time.Time) ulid.ULID { return job("D1") }

// jobOption shapes a job of the table.
type jobOption func(*persistence.Job)

// storedJob is job name of the table as the store holds it.
func storedJob(name string, state persistence.JobState, opts ...jobOption) *persistence.Job {
	j := &persistence.Job{ID: job(name), TeamID: bookTeam, State: state, Engine: "lottie", OutputName: "out.mp4"}
	for _, o := range opts {
		o(j)
	}
	return j
}

// renderingOn: the job renders attempt on node n1.
func renderingOn(attempt int) jobOption {
	return func(j *persistence.Job) { j.Attempts, j.Node = attempt, "n1" }
}

func childrenOf(names ...string) jobOption {
	return func(j *persistence.Job) {
		for _, n := range names {
			j.Children = append(j.Children, job(n))
		}
	}
}

// splitInto: the job is split into chunks of 10 frames each.
func splitInto(names ...string) jobOption {
	return func(j *persistence.Job) { childrenOf(names...)(j); j.ChunkFrames = 10 }
}

// chunkOf: the job is chunk i (from 0) of parent, frames 10i to 10i+9.
func chunkOf(parent string, i int) jobOption {
	return func(j *persistence.Job) {
		j.Kind, j.ParentID = persistence.KindChunk, job(parent)
		j.Spec.Settings.Frames = &renderer.Frames{Start: 10 * i, End: 10*i + 9}
	}
}

func childOf(parent string) jobOption { return func(j *persistence.Job) { j.ParentID = job(parent) } }

func withWebhook(j *persistence.Job) {
	j.Spec.Webhook = &persistence.Webhook{URL: "https://example.test/hook"}
}

func startedAt(t time.Time) jobOption { return func(j *persistence.Job) { j.StartedAt = t } }

func inClientBucket(j *persistence.Job) {
	j.Spec.Upload = &persistence.Upload{Params: &persistence.UploadParams{}}
}

// jobStep is one message to the book at a time after the start, its effects and the job's
// state after it (zero: not checked). A nil want is not checked.
type jobStep struct {
	at        time.Duration
	event     func(b *jobBook, now time.Time) effects
	failWrite bool
	want      []string
	state     persistence.JobState
}

// Messages, as the table writes them.
func msg(m any) func(*jobBook, time.Time) effects {
	return func(b *jobBook, now time.Time) effects { return b.on(now, m) }
}

func start(b *jobBook, now time.Time) effects { return b.onStart(now) }

// children gives a pending parent its children as the store holds them.
func children(kids ...*persistence.Job) func(*jobBook, time.Time) effects {
	return func(b *jobBook, now time.Time) effects { return b.onChildren(now, kids, nil) }
}

func offerFrom(node string) *offer { return &offer{nodeID: node} }

func doneBy(attempt int) *renderDone {
	return &renderDone{attempt: attempt, node: "n1", duration: 2 * time.Second, size: 100}
}

func attemptFailed(attempt int, err string, retryable bool) *renderFailed {
	return &renderFailed{attempt: attempt, node: "n1", err: err, retryable: retryable}
}

type jobBookCase struct {
	name string
	job  *persistence.Job
	// resume: a coordinator's restart activates the job.
	resume bool
	rules  func(*jobRules)
	// covers names the rows of STATE_MACHINE.md's job table the case goes through ("event
	// from"): TestJobBook checks that the case wrote that change, and
	// TestJobBookCoversTheStateMachine that every row is covered.
	covers []string
	steps  []jobStep
}

func jobBookCases() []jobBookCase {
	s := time.Second
	return []jobBookCase{
		{name: "an offer dispatches a queued job to the node, which is given the attempt once durable",
			job: storedJob("J1", persistence.JobQueued), covers: []string{"dispatched queued"}, steps: []jobStep{
				{event: msg(offerFrom("n1")), want: []string{
					`write J1 queued->render:dorender "dispatched to node n1 (attempt 1)"`,
					"> publish J1 queued->render:dorender", "> scheduler offerClaimed J1", "> node n1 assign J1/1"},
					state: persistence.JobRendering},
			}},
		{name: "an offer the store cannot record is declined; one for a job no longer queued too (cancel against dispatch)",
			job: storedJob("J1", persistence.JobQueued), covers: []string{"cancel queued"}, steps: []jobStep{
				{event: msg(offerFrom("n1")), failWrite: true, want: []string{
					`write J1 queued->render:dorender "dispatched to node n1 (attempt 1)"`, "> refused: scheduler offerDeclined J1"},
					state: persistence.JobQueued},
				{event: msg(&cancelRequest{}), want: []string{`write J1 queued->manually_cancelled "cancelled"`,
					"> publish J1 queued->manually_cancelled", "> scheduler jobWithdrawn J1", "> reply cancelled J1 relatives=[]"},
					state: persistence.JobCancelled},
				{event: msg(offerFrom("n1")), want: []string{"scheduler offerDeclined J1"}, state: persistence.JobCancelled},
				{event: msg(&cancelRequest{}), want: []string{"reply not cancelled J1 manually_cancelled"}},
			}},
		{name: "a rendering job is not cancelled (the interface's cancel refuses it), but stopped: its node abandons the attempt, its relatives are cancelled",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1), childOf("P1")), covers: []string{"stop render:dorender"}, steps: []jobStep{
				{event: msg(&cancelRequest{}), want: []string{"reply not cancelled J1 render:dorender"}},
				{event: msg(&stopRequest{by: "team acme"}), want: []string{
					`write J1 render:dorender->manually_cancelled "stopped by team acme while rendering on node n1 (attempt 1)"`,
					"> publish J1 render:dorender->manually_cancelled", "> node n1 withdraw J1/1: stopped by team acme",
					"> forget outputs/J1/", "> cascade P1", "> reply answer J1 manually_cancelled"}, state: persistence.JobCancelled},
				{event: msg(&stopRequest{by: "team acme"}), want: []string{"reply error: not rendering: the job is manually_cancelled, not rendering"}},
			}},
		{name: "a stop the store cannot record answers its error and changes nothing",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), steps: []jobStep{
				{event: msg(&stopRequest{by: "team acme"}), failWrite: true, want: []string{
					`write J1 render:dorender->manually_cancelled "stopped by team acme while rendering on node n1 (attempt 1)"`,
					"> refused: reply error: disk full"}, state: persistence.JobRendering},
			}},
		{name: "progress is saved at most once a second with the lines reported since; a finished render ends the job",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1), withWebhook), covers: []string{"render_finished render:dorender"}, steps: []jobStep{
				{event: msg(&renderProgress{attempt: 1, node: "n1", percent: 10, log: []string{"frame 1"}}), want: []string{
					`write J1 render:dorender->render:dorender 10% "frame 1"`, "> publish progress J1 10"}},
				{at: 500 * time.Millisecond, event: msg(&renderProgress{attempt: 1, node: "n1", percent: 30, log: []string{"frame 3"}}), want: none},
				{at: 1500 * time.Millisecond, event: msg(&renderProgress{attempt: 1, node: "n1", percent: 140}), want: []string{
					`write J1 render:dorender->render:dorender 100% "frame 3"`, "> publish progress J1 100"}},
				{at: 1600 * time.Millisecond, event: msg(&renderProgress{attempt: 1, node: "n1", percent: 100, log: []string{"muxing"}}), want: none},
				{at: 2 * s, event: msg(doneBy(1)), want: []string{
					`write J1 render:dorender->finished 100% "muxing" "finished on node n1 in 2s" +delivery`,
					"> publish J1 render:dorender->finished", "> webhooks delivery D1", "> settle J1/1", "> publish finished lottie 2s"},
					state: persistence.JobFinished},
				// The node sent its result again before hearing it was settled.
				{at: 3 * s, event: msg(doneBy(1)), want: []string{"settle J1/1"}, state: persistence.JobFinished},
			}},
		{name: "reports of a stale attempt are rejected: progress quietly, a result in the job's log, its node settled",
			job: storedJob("J1", persistence.JobRendering, renderingOn(2)), steps: []jobStep{
				{event: msg(&renderProgress{attempt: 1, node: "n1", percent: 50}), want: []string{"publish stale J1/1 progress"}},
				{event: msg(doneBy(1)), want: []string{
					`log J1 "rejected the done report of attempt 1 from node n1: the job is render:dorender at attempt 2" then [settle J1/1, publish stale J1/1 done]`}},
				{event: msg(attemptFailed(3, "boom", true)), want: []string{
					`log J1 "rejected the failure report of attempt 3 from node n1: the job is render:dorender at attempt 2" then [settle J1/3, publish stale J1/3 failure]`},
					state: persistence.JobRendering},
			}},
		{name: "reports of the current attempt from another node than the one rendering it are rejected, naming both nodes",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), steps: []jobStep{
				{event: msg(&renderProgress{attempt: 1, node: "n2", percent: 66, log: []string{"forged"}}), want: []string{"publish stale J1/1 progress"}},
				{event: msg(&renderFailed{attempt: 1, node: "n2", err: "forged", retryable: false}), want: []string{
					`log J1 "rejected the failure report of attempt 1 from node n2: the attempt renders on node n1" then [settle J1/1, publish stale J1/1 failure]`}},
				{event: msg(&renderDone{attempt: 1, node: "n2", duration: s}), want: []string{
					`log J1 "rejected the done report of attempt 1 from node n2: the attempt renders on node n1" then [settle J1/1, publish stale J1/1 done]`},
					state: persistence.JobRendering},
				{event: msg(doneBy(1)), state: persistence.JobFinished},
			}},
		{name: "a retryable failure queues the job again until max attempts, then it fails naming each attempt",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), covers: []string{"attempt_lost render:dorender", "render_failed render:dorender"}, steps: []jobStep{
				{event: msg(attemptFailed(1, "node lost", true)), want: []string{
					`write J1 render:dorender->queued 0% "attempt 1 on node n1 ended: node lost" "queued again"`,
					"> publish J1 render:dorender->queued", "> settle J1/1", "> publish requeued J1", "> scheduler jobsQueued J1 avoid=n1"},
					state: persistence.JobQueued},
				{event: msg(offerFrom("n2")), state: persistence.JobRendering},
				{event: msg(&renderFailed{attempt: 2, node: "n2", err: "silent", retryable: true}), state: persistence.JobQueued},
				{event: msg(offerFrom("n3")), state: persistence.JobRendering},
				{event: msg(&renderFailed{attempt: 3, node: "n3", err: "crashed", retryable: true}), want: []string{
					`write J1 render:dorender->error 0% "attempt 3 on node n3 ended: crashed"`, "> publish J1 render:dorender->error", "> settle J1/3"},
					state: persistence.JobFailed},
				// The same failure again is settled and changes nothing.
				{event: msg(&renderFailed{attempt: 3, node: "n3", err: "crashed", retryable: true}), want: []string{"settle J1/3"}},
			}},
		{name: "a failure that is the job's own fails it at once and tells its parent",
			job: storedJob("C1", persistence.JobRendering, renderingOn(1), childOf("P1")), steps: []jobStep{
				{event: msg(attemptFailed(1, "missing layer", false)), want: []string{
					`write C1 render:dorender->error 0% "attempt 1 on node n1 ended: missing layer"`,
					"> publish C1 render:dorender->error", "> settle C1/1", "> job P1 childFailed C1: missing layer"}, state: persistence.JobFailed},
			}},
		{name: "an output the farm's bucket does not hold fails the attempt, uncounted, and the job waits longer each time before it is queued again",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), rules: func(r *jobRules) { r.farmUploads = true }, steps: []jobStep{
				{event: msg(doneBy(1)), want: []string{"confirm upload /1"}},
				{event: msg(&outputConfirmed{done: doneBy(1), err: errors.New("no such key")}), want: []string{
					`write J1 render:dorender->queued 0% "attempt 1 on node n1 ended: the output is not in the object store: no such key" "the farm's storage failed the attempt, which does not count: queued again in 10s"`,
					"> publish J1 render:dorender->queued", "> settle J1/1", "> publish requeued J1", "> after 10s: scheduler jobsQueued J1"},
					state: persistence.JobQueued},
				{at: 10 * s, event: msg(offerFrom("n1")), state: persistence.JobRendering},
				{at: 11 * s, event: msg(&outputConfirmed{done: doneBy(2), err: errors.New("no such key")}), want: []string{
					`write J1 render:dorender->queued 0% "attempt 2 on node n1 ended: the output is not in the object store: no such key" "the farm's storage failed the attempt, which does not count: queued again in 20s"`,
					"> publish J1 render:dorender->queued", "> settle J1/2", "> publish requeued J1", "> after 20s: scheduler jobsQueued J1"},
					state: persistence.JobQueued},
				{at: 31 * s, event: msg(offerFrom("n1")), state: persistence.JobRendering},
				{at: 32 * s, event: msg(&outputConfirmed{done: doneBy(3)}), want: []string{
					`write J1 render:dorender->finished 100% "finished on node n1 in 2s"`, "> publish J1 render:dorender->finished",
					"> settle J1/3", "> publish finished lottie 2s"}, state: persistence.JobFinished},
			}},
		{name: "an output sent to the client's own bucket is not looked for in the farm's",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1), inClientBucket), rules: func(r *jobRules) { r.farmUploads = true }, steps: []jobStep{
				{event: msg(doneBy(1)), state: persistence.JobFinished},
			}},
		{name: "a pending parent learns which children it waits for, and is queued when the last finished",
			job: storedJob("P1", persistence.JobPending, childrenOf("C1", "C2")), covers: []string{"children_finished pending"}, steps: []jobStep{
				{event: children(storedJob("C1", persistence.JobRendering), storedJob("C2", persistence.JobFinished)), want: none},
				{event: msg(&childFinished{child: job("C9")}), want: none},
				{event: msg(&childFinished{child: job("C1")}), want: []string{
					`write P1 pending->queued 0% "all 2 child jobs finished; their outputs go into this job"`,
					"> publish P1 pending->queued", "> scheduler jobsQueued P1"}, state: persistence.JobQueued},
			}},
		{name: "a parent whose children all finished while it had no actor is queued as it starts",
			job: storedJob("P1", persistence.JobPending, childrenOf("C1")), covers: []string{"children_finished pending"}, steps: []jobStep{
				{event: children(storedJob("C1", persistence.JobFinished)), want: []string{
					`write P1 pending->queued 0% "all 1 child jobs finished; their outputs go into this job"`,
					"> publish P1 pending->queued", "> scheduler jobsQueued P1"}, state: persistence.JobQueued},
			}},
		{name: "a failed child fails its parent, which fails its other children and tells its own parent",
			job: storedJob("P1", persistence.JobPending, childrenOf("C1", "C2"), childOf("G1")), covers: []string{"child_failed pending"}, steps: []jobStep{
				{event: children(storedJob("C1", persistence.JobRendering), storedJob("C2", persistence.JobQueued)), want: none},
				{event: msg(&childFailed{child: job("C1"), reason: "missing layer"}), want: []string{
					fmt.Sprintf(`write P1 pending->error 0%% "child job %s failed: missing layer"`, job("C1")),
					"> publish P1 pending->error",
					fmt.Sprintf("> job C2 relativeFailed: parent job %s failed: child job %s failed: missing layer", job("P1"), job("C1")),
					fmt.Sprintf("> job G1 childFailed P1: child job %s failed: missing layer", job("C1"))}, state: persistence.JobFailed},
				{event: msg(&childFailed{child: job("C2"), reason: "late"}), want: none, state: persistence.JobFailed},
			}},
		{name: "a queued job whose relative failed fails, leaves the queue and answers a sweep that asked",
			job: storedJob("C2", persistence.JobQueued, childOf("P1")), covers: []string{"relative_failed queued"}, steps: []jobStep{
				{event: msg(&relativeFailed{reason: "parent failed"}), want: []string{`write C2 queued->error 0% "parent failed"`,
					"> publish C2 queued->error", "> scheduler jobWithdrawn C2", "> reply ended"}, state: persistence.JobFailed},
				{event: msg(&relativeFailed{reason: "again"}), want: []string{"reply ended"}},
			}},
		{name: "a pending job whose parent failed fails and passes it down",
			job: storedJob("P2", persistence.JobPending, childrenOf("C3"), childOf("G1")), covers: []string{"relative_failed pending"}, steps: []jobStep{
				{event: msg(&relativeFailed{reason: "grandparent failed"}), want: []string{`write P2 pending->error 0% "grandparent failed"`,
					"> publish P2 pending->error", fmt.Sprintf("> job C3 relativeFailed: parent job %s failed: grandparent failed", job("P2")),
					"> reply ended"}, state: persistence.JobFailed},
			}},
		{name: "a pending parent cancelled leaves the queue alone and names its relatives",
			job: storedJob("P3", persistence.JobPending, childrenOf("C4", "C5")), covers: []string{"cancel pending"}, steps: []jobStep{
				{event: msg(&cancelRequest{}), want: []string{`write P3 pending->manually_cancelled "cancelled"`,
					"> publish P3 pending->manually_cancelled", "> reply cancelled P3 relatives=[C4 C5]"}, state: persistence.JobCancelled},
			}},
		{name: "a cancel the store cannot record answers not cancelled",
			job: storedJob("J1", persistence.JobQueued), steps: []jobStep{
				{event: msg(&cancelRequest{}), failWrite: true, want: []string{`write J1 queued->manually_cancelled "cancelled"`,
					"> refused: reply not cancelled J1 queued"}, state: persistence.JobQueued},
			}},
		{name: "a chunk tells its split job when it starts and how far it rendered, and the job's log which node rendered its frames",
			job: storedJob("K1", persistence.JobQueued, chunkOf("S1", 1)), steps: []jobStep{
				{event: msg(offerFrom("n1")), want: []string{`write K1 queued->render:dorender "dispatched to node n1 (attempt 1)"`,
					"> publish K1 queued->render:dorender (chunk)", "> scheduler offerClaimed K1", "> node n1 assign K1/1", "> job S1 chunkProgress K1 0"}},
				{event: msg(&renderProgress{attempt: 1, node: "n1", percent: 40}), want: []string{"job S1 chunkProgress K1 40",
					`write K1 render:dorender->render:dorender 40%`, "> publish progress K1 40"}},
				{at: 2 * s, event: msg(doneBy(1)), want: []string{`write K1 render:dorender->finished 100% "finished on node n1 in 2s"`,
					"> publish K1 render:dorender->finished (chunk)", "> settle K1/1", "> publish finished lottie 2s",
					`> log S1 "frames 10 to 19 rendered on node n1 in 2s (attempt 1)" then [job S1 childFinished K1]`}, state: persistence.JobFinished},
			}},
		{name: "a split job's progress is its chunks', saved when the first starts and then once a second; it joins when the last is rendered",
			job: storedJob("S1", persistence.JobPending, splitInto("K0", "K1")), steps: []jobStep{
				{event: children(storedJob("K0", persistence.JobQueued, chunkOf("S1", 0)), storedJob("K1", persistence.JobQueued, chunkOf("S1", 1))), want: none},
				{event: msg(&chunkProgress{chunk: job("K0"), percent: 0}), want: []string{`write S1 pending->pending 0%`, "> publish progress S1 0"}},
				{at: 100 * time.Millisecond, event: msg(&chunkProgress{chunk: job("K0"), percent: 50}), want: []string{"after 900ms: job S1 chunkProgressDue"}},
				{at: 200 * time.Millisecond, event: msg(&chunkProgress{chunk: job("K1"), percent: 50}), want: none},
				{at: s, event: msg(&chunkProgressDue{}), want: []string{`write S1 pending->pending 47.5%`, "> publish progress S1 47.5"}},
				{at: 2 * s, event: msg(&childFinished{child: job("K0")}), want: []string{`write S1 pending->pending 71.25%`, "> publish progress S1 71.25"}},
				{at: 3 * s, event: msg(&childFinished{child: job("K1")}), want: []string{
					`write S1 pending->queued 95% "all 2 chunks rendered; queued to join them"`, "> publish S1 pending->queued", "> scheduler jobsQueued S1"},
					state: persistence.JobQueued},
				{at: 4 * s, event: msg(offerFrom("n1")), want: []string{`write S1 queued->render:dorender 95% "dispatched to node n1 (attempt 1)"`,
					"> publish S1 queued->render:dorender", "> scheduler offerClaimed S1", "> node n1 assign S1/1"}},
				{at: 5 * s, event: msg(&renderProgress{attempt: 1, node: "n1", percent: 50}), want: []string{`write S1 render:dorender->render:dorender 97.5%`, "> publish progress S1 97.5"}},
				{at: 6 * s, event: msg(doneBy(1)), want: []string{
					`write S1 render:dorender->finished 100% "finished on node n1 in 2s" "the split render took 6s from its first chunk's start to the end of its join"`,
					"> publish S1 render:dorender->finished", "> settle S1/1", "> publish finished lottie 2s", "> forget outputs/K0/,outputs/K1/"},
					state: persistence.JobFinished},
			}},
		{name: "a split job cancelled while its chunks wait hands them to the sweeper once durable, without reading them",
			job: storedJob("S1", persistence.JobPending, splitInto("K0", "K1"), startedAt(bookStart)), covers: []string{"cancel pending"}, steps: []jobStep{
				{event: msg(&cancelRequest{}), want: []string{`write S1 pending->manually_cancelled "cancelled"`,
					"> publish S1 pending->manually_cancelled", "> sweeper sweep S1 [K0 K1]", "> reply cancelled S1 relatives=[]"}, state: persistence.JobCancelled},
			}},
		{name: "a chunk failing for good fails its split job, naming the chunk's frames; the sweeper ends the others",
			job: storedJob("S1", persistence.JobPending, splitInto("K0", "K1")), steps: []jobStep{
				{event: children(storedJob("K0", persistence.JobRendering, chunkOf("S1", 0)), storedJob("K1", persistence.JobQueued, chunkOf("S1", 1))), want: none},
				{event: msg(&childFailed{child: job("K0"), reason: "crashed"}), want: []string{
					`write S1 pending->error 0% "chunk 1 of 2 (frames 0 to 9) failed: crashed"`, "> publish S1 pending->error",
					"> sweeper sweep S1 [K0 K1] failed"}, state: persistence.JobFailed},
			}},
		{name: "a chunk rendering when its job no longer wants it is stopped, its node told to abandon it",
			job: storedJob("K1", persistence.JobRendering, chunkOf("S1", 1), renderingOn(2)), steps: []jobStep{
				{event: msg(&relativeFailed{reason: "its job failed"}), want: []string{
					`write K1 render:dorender->manually_cancelled "its job failed while rendering on node n1 (attempt 2)"`,
					"> publish K1 render:dorender->manually_cancelled (chunk)", "> node n1 withdraw K1/2: its job failed", "> forget outputs/K1/", "> reply ended"},
					state: persistence.JobCancelled},
			}},
		{name: "a chunk rendering is stopped by its job's cancel, which the answer says",
			job: storedJob("K1", persistence.JobRendering, chunkOf("S1", 1), renderingOn(1)), steps: []jobStep{
				{event: msg(&cancelRequest{}), want: []string{
					`write K1 render:dorender->manually_cancelled "its job was cancelled while rendering on node n1 (attempt 1)"`,
					"> publish K1 render:dorender->manually_cancelled (chunk)", "> node n1 withdraw K1/1: its job was cancelled", "> forget outputs/K1/",
					`> log S1 "frames 10 to 19: attempt 1 on node n1 stopped: the job was cancelled" then [reply cancelled K1 relatives=[S1]]`},
					state: persistence.JobCancelled},
			}},
		{name: "an operator sends a rendering job again: its node gives the attempt back, and the job is queued, the attempt uncounted",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), covers: []string{"attempt_lost render:dorender"}, steps: []jobStep{
				{event: msg(&sendAgainRequest{by: "admin"}), want: []string{
					`write J1 render:dorender->queued 0% "attempt 1 on node n1 taken back by admin: queued again (it does not count against the attempts)"`,
					"> publish J1 render:dorender->queued", "> node n1 withdraw J1/1: sent again by admin", "> publish requeued J1",
					"> scheduler jobsQueued J1", "> reply answer J1 queued"}, state: persistence.JobQueued},
				{event: msg(&sendAgainRequest{by: "admin"}), want: []string{"reply error: not rendering: it is queued; only a rendering job is sent again"}},
			}},
		{name: "a chunk sent again says so in its split job's log, the log its client reads",
			job: storedJob("K1", persistence.JobRendering, chunkOf("S1", 1), renderingOn(1)), steps: []jobStep{
				{event: msg(&sendAgainRequest{by: "admin"}), want: []string{
					`write K1 render:dorender->queued 0% "attempt 1 on node n1 taken back by admin: queued again (it does not count against the attempts)"`,
					"> publish K1 render:dorender->queued (chunk)", "> node n1 withdraw K1/1: sent again by admin", "> publish requeued K1",
					"> scheduler jobsQueued K1",
					`> log S1 "frames 10 to 19: attempt 1 on node n1 taken back by admin: queued again, not counted against the attempts" then [reply answer K1 queued]`},
					state: persistence.JobQueued},
			}},
		{name: "a job cancelled by someone names them in its log",
			job: storedJob("J1", persistence.JobQueued), steps: []jobStep{
				{event: msg(&cancelRequest{by: "the farm's admin"}), want: []string{`write J1 queued->manually_cancelled "cancelled by the farm's admin"`,
					"> publish J1 queued->manually_cancelled", "> scheduler jobWithdrawn J1", "> reply cancelled J1 relatives=[]"}, state: persistence.JobCancelled},
			}},
		{name: "a queued split job retagged takes its new place in the queue (its chunks are asked apart)",
			job: storedJob("S1", persistence.JobQueued, splitInto("K0")), steps: []jobStep{
				{event: msg(&retagRequest{priority: ptr(5), by: "team acme"}), want: []string{
					`retag S1 priority=5 tags=[] "priority 5 and tags [] set by team acme"`, "> scheduler jobWithdrawn S1",
					"> scheduler jobsQueued S1", "> reply answer S1 queued"}},
			}},
		{name: "a retag the store cannot record answers its error; a rendering job's is refused",
			job: storedJob("J1", persistence.JobPending), steps: []jobStep{
				{event: msg(&retagRequest{tags: &[]string{"hot"}, by: "team acme"}), failWrite: true, want: []string{
					`retag J1 priority=0 tags=[hot] "priority 0 and tags [hot] set by team acme"`, "> refused: reply error: disk full"}},
				{event: func(b *jobBook, now time.Time) effects {
					b.job = storedJob("J1", persistence.JobRendering, renderingOn(1))
					return b.on(now, &retagRequest{by: "team acme"})
				}, want: []string{"reply error: not queued or pending: the job is render:dorender"}},
			}},
		{name: "a render a restart interrupted is queued again, uncounted after a clean shutdown",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), resume: true, rules: func(r *jobRules) { r.cleanRestart = true }, steps: []jobStep{
				{event: start, want: []string{
					`write J1 render:dorender->queued 0% "attempt 1 on node n1 ended: the coordinator restarted during the render" "queued again"`,
					"> publish J1 render:dorender->queued", "> settle J1/1", "> publish requeued J1", "> scheduler jobsQueued J1"}, state: persistence.JobQueued},
			}},
		{name: "a render a restart interrupted waits for its node to reclaim it; adopted, it goes on, else it is queued again",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), resume: true, rules: func(r *jobRules) { r.adoptAfterRestart, r.takeover = true, true }, steps: []jobStep{
				{event: start, want: []string{"after 30s: job J1 adoptionExpired 1"}},
				{event: msg(&renderAdopted{attempt: 1, node: "n1"}), want: []string{
					`log J1 "attempt 1 on node n1 carried on across a failover (another replica leads the farm now): the render goes on, reporting to the new coordinator"`}},
				{at: 30 * s, event: msg(&adoptionExpired{attempt: 1}), state: persistence.JobQueued},
			}},
		{name: "a render a failover interrupted that no node reclaims is queued again, its log saying so",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), resume: true, rules: func(r *jobRules) { r.adoptAfterRestart, r.takeover = true, true }, steps: []jobStep{
				{event: start, want: []string{"after 30s: job J1 adoptionExpired 1"}},
				{at: 30 * s, event: msg(&adoptionExpired{attempt: 1}), want: []string{
					`write J1 render:dorender->queued 0% "attempt 1 on node n1 ended: another replica took over the farm during the render (a failover), and node n1 did not reclaim the attempt within 30s (cut off, or gone)" "queued again"`,
					"> publish J1 render:dorender->queued", "> settle J1/1", "> publish requeued J1", "> scheduler jobsQueued J1"}, state: persistence.JobQueued},
			}},
		{name: "a job started without a restart does nothing at its start",
			job: storedJob("J1", persistence.JobRendering, renderingOn(1)), steps: []jobStep{
				{event: start, want: none, state: persistence.JobRendering},
			}},
		{name: "a parent reading, after a restart, a cancelled child finishes the cascade the restart cut short",
			job: storedJob("P1", persistence.JobPending, childrenOf("C1", "C2")), resume: true, steps: []jobStep{
				{event: children(storedJob("C1", persistence.JobCancelled), storedJob("C2", persistence.JobQueued)), want: []string{"cascade P1"}},
			}},
	}
}

func TestJobBook(t *testing.T) {
	for _, c := range jobBookCases() {
		t.Run(c.name, func(t *testing.T) {
			rules := jobRulesForTest()
			if c.rules != nil {
				c.rules(&rules)
			}
			b := newJobBook(rules, bookIDs{}, storedClone(c.job), c.resume)
			wrote := map[string]bool{}
			for i, st := range c.steps {
				out := st.event(b, bookStart.Add(st.at))
				got := carryOutForTest(b, out, st.failWrite, wrote)
				if st.want != nil && !slices.Equal(got, st.want) {
					t.Errorf("step %d: effects\n  %s\nwant\n  %s", i, strings.Join(got, "\n  "), strings.Join(st.want, "\n  "))
				}
				if st.state != 0 && b.job.State != st.state {
					t.Errorf("step %d: job is %s, want %s", i, b.job.State, st.state)
				}
			}
			for _, row := range c.covers {
				event, from, _ := strings.Cut(row, " ")
				next := &persistence.Job{State: stateNamed(t, from)}
				if err := applyJobEvent(next, JobEvent(event)); err != nil {
					t.Fatalf("covers %q: %v", row, err)
				}
				if !wrote[from+"->"+next.State.String()] {
					t.Errorf("covers %q, but wrote no change from %s to %s", row, from, next.State)
				}
			}
		})
	}
}

// storedClone is a copy of a case's job, so a case runs alike however often.
func storedClone(j *persistence.Job) *persistence.Job {
	c := j.Clone()
	c.Children = slices.Clone(j.Children)
	return c
}

func stateNamed(t *testing.T, name string) persistence.JobState {
	for _, st := range []persistence.JobState{persistence.JobQueued, persistence.JobPending, persistence.JobRendering,
		persistence.JobFinished, persistence.JobFailed, persistence.JobCancelled} {
		if st.String() == name {
			return st
		}
	}
	t.Fatalf("no job state %q", name)
	return 0
}

// TestJobBookCoversTheStateMachine checks that TestJobBook goes through every row of
// STATE_MACHINE.md's job table, from each state the row lists.
func TestJobBookCoversTheStateMachine(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range jobBookCases() {
		for _, row := range c.covers {
			covered[row] = true
		}
	}
	for ev, row := range docTable(t, "job-table") {
		from, _, _ := strings.Cut(row, " -> ")
		for _, state := range strings.Split(from, ", ") {
			if !covered[ev+" "+state] {
				t.Errorf("no case of TestJobBook covers %s from %s", ev, state)
			}
		}
	}
}

// carryOutForTest writes effects as the table states them, making a write of the job's record
// durable (or refusing it) and writing what follows it after "> "; wrote gathers the changes
// of state made durable ("from->to").
func carryOutForTest(b *jobBook, out effects, failWrite bool, wrote map[string]bool) []string {
	var lines []string
	for _, e := range out {
		w, ok := e.(jobWrite)
		if _, logged := e.(logged); logged {
			continue
		}
		lines = append(lines, describeJobEffect(e))
		if !ok || w.next == nil {
			continue
		}
		var err error
		prefix := "> "
		if failWrite {
			err, prefix = errDiskFull, "> refused: "
		} else if c, ok := w.cmd.(*persistence.ChangeJob); ok {
			wrote[c.Prev.String()+"->"+c.Job.State.String()] = true
		}
		for _, line := range carryOutForTest(b, b.written(w, err), false, wrote) {
			lines = append(lines, prefix+line)
		}
	}
	return lines
}

func describeJobEffect(e effect) string {
	switch e := e.(type) {
	case jobWrite:
		return describeWrite(e)
	case reply:
		return "reply " + describeJobMsg(e.msg)
	case toJob:
		return "job " + jobName(e.job) + " " + describeJobMsg(e.msg)
	case toService:
		return string(e.to) + " " + describeJobMsg(e.msg)
	case toNode:
		node := e.node
		if a, ok := e.msg.(*assign); ok {
			node = a.job.Node
		}
		return "node " + node + " " + describeJobMsg(e.msg)
	case settleReport:
		return fmt.Sprintf("settle %s/%d", jobName(e.job), e.attempt)
	case cascade:
		return "cascade " + names(e.jobs, ",")
	case published:
		return "publish " + describeJobMsg(e.event)
	case later:
		return fmt.Sprintf("after %s: %s", e.after, describeJobEffect(e.eff))
	case confirmUpload:
		return fmt.Sprintf("confirm upload /%d", e.done.attempt)
	}
	return fmt.Sprintf("%T", e)
}

func describeWrite(w jobWrite) string {
	switch c := w.cmd.(type) {
	case *persistence.ChangeJob:
		s := fmt.Sprintf("write %s %s->%s", jobName(c.Job.ID), c.Prev, c.Job.State)
		// A cancel's progress, and a dispatch's from nothing, say nothing.
		dispatchedFromNothing := c.Prev != c.Job.State && c.Job.State == persistence.JobRendering && c.Job.Progress == 0
		if c.Job.State != persistence.JobCancelled && !dispatchedFromNothing {
			s += fmt.Sprintf(" %g%%", c.Job.Progress)
		}
		for _, l := range c.Log {
			s += fmt.Sprintf(" %q", l)
		}
		if c.Delivery != nil {
			s += " +delivery"
		}
		return s
	case *persistence.RetagJob:
		return fmt.Sprintf("retag %s priority=%d tags=[%s] %q", jobName(c.JobID), c.Priority, strings.Join(c.Tags, ","), c.Line)
	case *persistence.AppendJobLog:
		s := fmt.Sprintf("log %s %q", jobName(c.JobID), strings.Join(c.Lines, " | "))
		if len(w.then) > 0 {
			var then []string
			for _, e := range w.then {
				then = append(then, describeJobEffect(e))
			}
			s += " then [" + strings.Join(then, ", ") + "]"
		}
		return s
	case *persistence.ForgetObjects:
		var keys []string
		for _, k := range c.Keys {
			kind, rest, _ := strings.Cut(k, "/")
			id, tail, _ := strings.Cut(rest, "/")
			keys = append(keys, kind+"/"+jobName(ulid.MustParse(id))+"/"+tail)
		}
		return "forget " + strings.Join(keys, ",")
	}
	return fmt.Sprintf("write %T", w.cmd)
}

func describeJobMsg(msg any) string {
	switch m := msg.(type) {
	case *offerClaimed:
		return "offerClaimed " + jobName(m.jobID)
	case *offerDeclined:
		return "offerDeclined " + jobName(m.jobID)
	case *jobWithdrawn:
		return "jobWithdrawn " + jobName(m.jobID)
	case *jobsQueued:
		e := m.entries[0]
		s := "jobsQueued " + jobName(e.JobID)
		if len(e.Avoid) > 0 {
			s += " avoid=" + strings.Join(e.Avoid, ",")
		}
		return s
	case *limitsReleased:
		return "limitsReleased " + jobName(m.job)
	case *sweepChunks:
		s := fmt.Sprintf("sweep %s [%s]", jobName(m.job), names(m.chunks, " "))
		if m.failed {
			s += " failed"
		}
		return s
	case *deliveryQueued:
		return "delivery " + jobName(m.delivery.ID)
	case *assign:
		return fmt.Sprintf("assign %s/%d", jobName(m.job.ID), m.job.Attempts)
	case *withdrawAttempt:
		return fmt.Sprintf("withdraw %s/%d: %s", jobName(m.jobID), m.attempt, m.reason)
	case *childFinished:
		return "childFinished " + jobName(m.child)
	case *childFailed:
		return fmt.Sprintf("childFailed %s: %s", jobName(m.child), m.reason)
	case *chunkProgress:
		return fmt.Sprintf("chunkProgress %s %g", jobName(m.chunk), m.percent)
	case *chunkProgressDue:
		return "chunkProgressDue"
	case *relativeFailed:
		return "relativeFailed: " + m.reason
	case *relativeEnded:
		return "ended"
	case *adoptionExpired:
		return fmt.Sprintf("adoptionExpired %d", m.attempt)
	case *retagRequest:
		return fmt.Sprintf("retag %d [%s]", *m.priority, strings.Join(*m.tags, ","))
	case *cancelResult:
		if !m.cancelled {
			return fmt.Sprintf("not cancelled %s %s", jobName(m.jobID), m.job.State)
		}
		return fmt.Sprintf("cancelled %s relatives=[%s]", jobName(m.jobID), names(m.relatives, " "))
	case *jobAnswer:
		if m.err != nil {
			return "error: " + m.err.Error()
		}
		return fmt.Sprintf("answer %s %s", jobName(m.job.ID), m.job.State)
	case JobStateChanged:
		s := fmt.Sprintf("%s %s->%s", jobName(m.Job), m.From, m.To)
		if m.Chunk {
			s += " (chunk)"
		}
		return s
	case JobProgressSaved:
		return fmt.Sprintf("progress %s %g", jobName(m.Job), m.Percent)
	case RenderFinished:
		return fmt.Sprintf("finished %s %s", m.Engine, m.Took)
	case StaleReport:
		return fmt.Sprintf("stale %s/%d %s", jobName(m.Job), m.Attempt, m.What)
	case JobRequeued:
		return "requeued " + jobName(m.Job)
	}
	return fmt.Sprintf("%T", msg)
}

func names(ids []ulid.ULID, sep string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = jobName(id)
	}
	return strings.Join(out, sep)
}

func ptr[T any](v T) *T { return &v }
