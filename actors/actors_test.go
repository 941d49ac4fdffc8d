package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/actors/signals"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/node"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/secretbox"
	"github.com/framefarm/framefarm/renderer"
)

const wait = 20 * time.Second

// fixture is a coordinator in this process: real store, real actors, a fake clock.
type fixture struct {
	t     testing.TB
	store *persistence.Store
	coord *actors.Coordinator
	clock *clock.Fake
	obs   *recorder
	ids   *persistence.IDs
	team  ulid.ULID
	cfg   actors.Config
	deps  actors.Deps
}

func newFixture(t testing.TB, cfg actors.Config) *fixture {
	t.Helper()
	return newFixtureWith(t, cfg, nil)
}

// newFixtureWith is newFixture with the dependencies changed by change before the coordinator
// is made.
func newFixtureWith(t testing.TB, cfg actors.Config, change func(*actors.Deps)) *fixture {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	store, err := persistence.Open(filepath.Join(dir, "framefarm.db"), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := blobs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secretbox.New(make([]byte, 32))
	obs := newRecorder()
	events := &actors.Events{}
	obs.watch(events)
	ids := persistence.NewIDs()
	// Nodes upload outputs here; the coordinator's own file routes are the API's, not tested here.
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(files.Close)
	deps := actors.Deps{
		Store: store, Objects: objects, NodeURLs: blobs.NewSigner(files.URL, []byte("k")), Secrets: box,
		Clock: clk, IDs: ids, Events: events, Logger: slog.New(slog.DiscardHandler), Outbound: http.DefaultClient,
		WebhookBody: func(j *persistence.Job, _ json.RawMessage) ([]byte, error) {
			return []byte(`{"id":"` + j.ID.String() + `"}`), nil
		},
	}
	if change != nil {
		change(&deps)
	}
	coord := actors.New(cfg, deps)
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, store: store, coord: coord, clock: clk, obs: obs, ids: ids, team: ids.New(clk.Now()), cfg: cfg, deps: deps}
	t.Cleanup(func() {
		f.coord.Stop(context.Background())
		store.Close()
	})
	return f
}

// restart stops the coordinator and starts a new one on the same store. The new one gets its
// own fake clock (at the same time): the old one's timers belong to a process that is gone.
func (f *fixture) restart() { f.t.Helper(); f.restartWith(func() {}) }

// restartWith is restart doing between, to the store, while no coordinator runs.
func (f *fixture) restartWith(between func()) {
	f.t.Helper()
	f.coord.Stop(context.Background())
	between()
	f.clock = clock.NewFake(f.clock.Now())
	f.deps.Clock = f.clock
	f.coord = actors.New(f.cfg, f.deps)
	if err := f.coord.Start(); err != nil {
		f.t.Fatal(err)
	}
}

// queue creates queued jobs for the engine "test" and returns their ids.
func (f *fixture) queue(team ulid.ULID, priority, n int) []ulid.ULID {
	f.t.Helper()
	var jobs []*persistence.Job
	for range n {
		id := f.ids.New(f.clock.Now())
		jobs = append(jobs, &persistence.Job{ID: id, TeamID: team, Kind: persistence.KindRender, Engine: "test",
			State: persistence.JobQueued, Priority: priority, OutputName: id.String() + ".mp4", CreatedAt: f.clock.Now()})
	}
	if err := f.coord.CreateJobs(jobs, nil); err != nil {
		f.t.Fatal(err)
	}
	out := make([]ulid.ULID, n)
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// runAgent connects a real node agent to the coordinator, in the coordinator's actor system.
func (f *fixture) runAgent(agent *node.Agent) {
	f.t.Helper()
	if err := agent.Start(f.coord.ActorSystem(), "agent-"+ulid.Make().String()); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	agent.Connect(f.coord.NodeGateway())
	go agent.Run(ctx)
}

// advanceWhenArmed waits until a timer of duration d is set, then moves the clock past it.
func (f *fixture) advanceWhenArmed(d time.Duration) {
	f.t.Helper()
	f.waitArmed(d)
	f.clock.Advance(d + time.Millisecond)
}

// waitArmed waits until a timer of duration d is set.
func (f *fixture) waitArmed(d time.Duration) {
	f.t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case armed := <-f.clock.Armed:
			if armed == d {
				return
			}
		case <-deadline:
			f.t.Fatalf("no %s timer was set", d)
		}
	}
}

// idleUntilPassivated moves the clock past every idle timer set until the job's actor stopped
// for the nth time.
func (f *fixture) idleUntilPassivated(id ulid.ULID, idle time.Duration, n int) {
	f.t.Helper()
	deadline := time.After(wait)
	for {
		done, changed := f.obs.Check(func() bool { return f.obs.stopped[id] >= n })
		if done {
			return
		}
		select {
		case armed := <-f.clock.Armed:
			if armed == idle {
				f.clock.Advance(idle + time.Millisecond)
			}
		case <-changed:
		case <-deadline:
			f.t.Fatalf("job %s's actor did not passivate", id)
		}
	}
}

// waitQueued asks the scheduler until it holds n queued jobs.
func (f *fixture) waitQueued(n int) {
	f.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		stats, err := f.coord.QueueStats()
		if err != nil {
			f.t.Fatal(err)
		}
		if stats.Depth["test"] == n {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the scheduler holds %d jobs, want %d", stats.Depth["test"], n)
		}
	}
}

func (f *fixture) job(id ulid.ULID) *persistence.Job {
	f.t.Helper()
	j, err := f.store.Job(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// recorder watches the actors of the tests (beside metrics, as in production), a way to wait for
// what they do.
type recorder struct {
	signals.Board
	states  map[ulid.ULID][]persistence.JobState
	stopped map[ulid.ULID]int
	stale   int
	nodes   map[string]actors.NodeState
	refused int
	hooks   map[ulid.ULID][]string
}

func newRecorder() *recorder {
	return &recorder{states: map[ulid.ULID][]persistence.JobState{},
		stopped: map[ulid.ULID]int{}, hooks: map[ulid.ULID][]string{}, nodes: map[string]actors.NodeState{}}
}

func (r *recorder) watch(ev *actors.Events) {
	ev.JobStateChanged.Subscribe(func(e actors.JobStateChanged) { r.Note(func() { r.states[e.Job] = append(r.states[e.Job], e.To) }) })
	ev.JobActorStopped.Subscribe(func(e actors.JobActorStopped) { r.Note(func() { r.stopped[e.Job]++ }) })
	ev.NodeMessageRefused.Subscribe(func(actors.NodeMessageRefused) { r.Note(func() { r.refused++ }) })
	ev.NodeStateChanged.Subscribe(func(e actors.NodeStateChanged) { r.Note(func() { r.nodes[e.Node] = e.To }) })
	ev.StaleReport.Subscribe(func(actors.StaleReport) { r.Note(func() { r.stale++ }) })
	ev.WebhookAttempted.Subscribe(func(e actors.WebhookAttempted) {
		r.Note(func() { r.hooks[e.Job] = append(r.hooks[e.Job], e.Result) })
	})
}

func (r *recorder) refusals() (n int) {
	r.Read(func() { n = r.refused })
	return n
}

// until waits for cond, evaluated under the recorder's lock after each event.
func (r *recorder) until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !r.Until(cond, wait) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func (r *recorder) reached(t testing.TB, id ulid.ULID, state persistence.JobState) {
	t.Helper()
	r.until(t, fmt.Sprintf("job %s to be %s", id, state), func() bool { return slices.Contains(r.states[id], state) })
}

// testNode is a render node speaking the real protocol through the coordinator's gateway,
// driven by the test. It sends no heartbeats of its own: tests that move the clock set a long
// lease, or beat for it.
type testNode struct {
	id      string
	session string
	// welcomeSeq is the assignment count its welcome said to go on from.
	welcomeSeq uint64
	hello      *protocol.Hello
	pid        *actor.PID
	f          *fixture
	assigned   chan assignment
	// acks are the results the coordinator acknowledged; selfTests the self-tests it asked for.
	acks      chan *protocol.FinalAck
	selfTests chan *protocol.SelfTest

	mu sync.Mutex
	// sessions are those of every welcome the node had: work under another is not its own.
	sessions map[string]bool
	// welcomed tells next that a session was added; unsure holds assignments whose session was
	// not known when they came (a welcome reaches its future after the assignments sent
	// behind it may reach the node).
	welcomed chan struct{}
	unsure   []assignment
}

type assignment struct {
	msg   *protocol.Assign
	reply func(any)
}

func (f *fixture) attachTestNode(id string, slots int, opts ...func(*protocol.Hello)) *testNode {
	f.t.Helper()
	n := &testNode{id: id, f: f, assigned: make(chan assignment, 1000), acks: make(chan *protocol.FinalAck, 1000),
		selfTests: make(chan *protocol.SelfTest, 10), sessions: map[string]bool{}, welcomed: make(chan struct{}, 1)}
	system := f.coord.ActorSystem()
	reply := n.send
	n.pid = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		env, ok := ctx.Message().(*protocol.Envelope)
		if !ok {
			return
		}
		switch m, _ := protocol.Open(env); m := m.(type) {
		case *protocol.Assign:
			n.assigned <- assignment{msg: m, reply: reply}
		case *protocol.FinalAck:
			n.acks <- m
		case *protocol.SelfTest:
			n.selfTests <- m
		}
	}))
	hello := &protocol.Hello{NodeID: id, Engines: []string{"test"}, Slots: slots, AgentAddress: n.pid.Address, AgentID: n.pid.Id, Incarnation: "1"}
	for _, opt := range opts {
		opt(hello)
	}
	n.hello = hello
	w, err := n.sayHello()
	if err != nil {
		f.t.Fatal(err)
	}
	n.session, n.welcomeSeq = w.Session, w.Seq
	return n
}

// sayHello asks for a challenge, answers it with the node's hello (again) and returns the
// welcome.
func (n *testNode) sayHello() (*protocol.Welcome, error) {
	challenge, err := n.f.askGateway(n.hello)
	if err != nil {
		return nil, err
	}
	h := *n.hello
	h.Nonce = challenge.(*protocol.Challenge).Nonce
	h.KeyProof = protocol.HelloProof(n.f.cfg.ClusterKey, h.Nonce, &h)
	answer, err := n.f.askGateway(&h)
	if err != nil {
		return nil, err
	}
	w := answer.(*protocol.Welcome)
	if !w.Accepted {
		return nil, fmt.Errorf("node refused: %s", w.Reason)
	}
	if w.Nonce != h.Nonce || !protocol.CheckWelcomeProof(n.f.cfg.ClusterKey, n.id, w) {
		return nil, errors.New("the welcome does not prove the cluster key")
	}
	n.mu.Lock()
	n.sessions[w.Session] = true
	n.mu.Unlock()
	select {
	case n.welcomed <- struct{}{}:
	default:
	}
	return w, nil
}

// askGateway sends a message to the gateway and returns its answer.
func (f *fixture) askGateway(msg any) (any, error) {
	res, err := f.coord.ActorSystem().Root.RequestFuture(f.coord.NodeGateway(), protocol.Wrap(msg), wait).Result()
	if err != nil {
		return nil, err
	}
	return protocol.Open(res.(*protocol.Envelope))
}

// send reports to the coordinator as this node, with the session of its welcome.
func (n *testNode) send(x any) {
	if m, ok := x.(protocol.FromNode); ok {
		*m.From() = protocol.Sender{NodeID: n.id, Session: n.session}
	}
	n.f.coord.ActorSystem().Root.Send(n.f.coord.NodeGateway(), protocol.Wrap(x))
}

// next waits for the node's next assignment; one under a session none of its welcomes gave is
// someone else's, and skipped.
func (n *testNode) next(t *testing.T) assignment {
	t.Helper()
	deadline := time.After(wait)
	for {
		if a, ok := n.takeOurs(); ok {
			return a
		}
		select {
		case a := <-n.assigned:
			n.unsure = append(n.unsure, a)
		case <-n.welcomed:
		case <-deadline:
			t.Fatal("no assignment")
			return assignment{}
		}
	}
}

// takeOurs takes the first assignment under one of the node's sessions.
func (n *testNode) takeOurs() (assignment, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, a := range n.unsure {
		if n.sessions[a.msg.Session] {
			n.unsure = slices.Delete(n.unsure, i, i+1)
			return a, true
		}
	}
	return assignment{}, false
}

// TestStaleAttemptReportsAreRejected: once a job moved to its next attempt, reports from the
// older one change nothing.
func TestStaleAttemptReportsAreRejected(t *testing.T) {
	f := newFixture(t, actors.Config{})
	n := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	first := n.next(t)
	if first.msg.Attempt != 1 || first.msg.JobID != id.String() {
		t.Fatalf("first assignment %+v", first.msg)
	}
	first.reply(&protocol.Failed{JobID: id.String(), Attempt: 1, Error: "node hiccup", Retryable: true})
	second := n.next(t)
	if second.msg.Attempt != 2 {
		t.Fatalf("second assignment attempt %d", second.msg.Attempt)
	}
	// The first attempt's late reports are fenced off.
	first.reply(&protocol.Progress{JobID: id.String(), Attempt: 1, Percent: 99})
	first.reply(&protocol.Done{JobID: id.String(), Attempt: 1, Duration: time.Second})
	f.obs.until(t, "two stale reports", func() bool { return f.obs.stale == 2 })
	if j := f.job(id); j.State != persistence.JobRendering || j.Progress != 0 || j.Attempts != 2 {
		t.Fatalf("after stale reports: %s, %v%%, attempt %d", j.State, j.Progress, j.Attempts)
	}
	second.reply(&protocol.Done{JobID: id.String(), Attempt: 2, Duration: 3 * time.Second})
	f.obs.reached(t, id, persistence.JobFinished)
	j := f.job(id)
	if len(j.Failures) != 1 || j.Failures[0].Node != "n1" || j.RenderDuration != 3*time.Second {
		t.Fatalf("finished job %+v", j)
	}
	// A report after the end is stale too.
	second.reply(&protocol.Failed{JobID: id.String(), Attempt: 2, Error: "late"})
	f.obs.until(t, "a third stale report", func() bool { return f.obs.stale == 3 })
	if f.job(id).State != persistence.JobFinished {
		t.Fatal("a late failure changed a finished job")
	}
}

// TestSchedulerOrder: the team holding fewer slots first, each team's jobs by priority, then
// age.
func TestSchedulerOrder(t *testing.T) {
	f := newFixture(t, actors.Config{})
	teamA, teamB := f.ids.New(f.clock.Now()), f.ids.New(f.clock.Now())
	a := f.queue(teamA, 0, 4)
	b := f.queue(teamB, 0, 1)
	urgent := f.queue(teamA, 5, 1)
	f.waitQueued(6) // job actors enqueue as they start: let the queue fill before a slot opens
	n := f.attachTestNode("n1", 2)
	// The two slots go to team A's urgent job (its best) and to team B's job, although A's other
	// jobs are older: one slot each. (The two assignments may reach the node in either order.)
	first, second := n.next(t), n.next(t)
	if first.msg.JobID != urgent[0].String() {
		first, second = second, first
	}
	if first.msg.JobID != urgent[0].String() || second.msg.JobID != b[0].String() {
		t.Fatalf("first round %s and %s, want urgent %s and team B's %s", first.msg.JobID, second.msg.JobID, urgent[0], b[0])
	}
	// Then team A's jobs, oldest first, as slots free.
	for _, want := range a {
		first.reply(&protocol.Done{JobID: first.msg.JobID, Attempt: first.msg.Attempt})
		next := n.next(t)
		if next.msg.JobID != want.String() {
			t.Fatalf("got %s, want %s (oldest of team A)", next.msg.JobID, want)
		}
		first = next
	}
}

// TestPriorityBeatsAge: with one slot, the highest priority goes first, whatever its age.
func TestPriorityBeatsAge(t *testing.T) {
	f := newFixture(t, actors.Config{})
	old := f.queue(f.team, 0, 3)
	urgent := f.queue(f.team, 9, 1)
	low := f.queue(f.team, -1, 1)
	f.waitQueued(5)
	n := f.attachTestNode("n1", 1)
	for _, want := range []ulid.ULID{urgent[0], old[0], old[1], old[2], low[0]} {
		a := n.next(t)
		if a.msg.JobID != want.String() {
			t.Fatalf("got %s, want %s", a.msg.JobID, want)
		}
		a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: a.msg.Attempt})
	}
}

// TestCancelRacingDispatchHasOneWinner: every job is either cancelled or dispatched, never both.
func TestCancelRacingDispatchHasOneWinner(t *testing.T) {
	f := newFixture(t, actors.Config{})
	jobs := f.queue(f.team, 0, 200)
	n := f.attachTestNode("n1", 50)
	var cancelled sync.Map
	var wg sync.WaitGroup
	for _, id := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := f.coord.CancelJobs([]ulid.ULID{id}, "")
			if err != nil {
				t.Error(err)
				return
			}
			if len(out.Cancelled) > 0 {
				cancelled.Store(id, true)
			}
		}()
	}
	wg.Wait()
	dispatched := map[string]bool{}
	for done := false; !done; {
		select {
		case a := <-n.assigned:
			dispatched[a.msg.JobID] = true
			a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: a.msg.Attempt})
		default:
			done = true
		}
		if done {
			// Everything not cancelled must be dispatched eventually; wait for the rest.
			missing := 0
			for _, id := range jobs {
				if _, c := cancelled.Load(id); !c && !dispatched[id.String()] {
					missing++
				}
			}
			if missing > 0 {
				a := n.next(t)
				dispatched[a.msg.JobID] = true
				a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: a.msg.Attempt})
				done = false
			}
		}
	}
	for _, id := range jobs {
		_, c := cancelled.Load(id)
		if c == dispatched[id.String()] {
			t.Fatalf("job %s: cancelled %v, dispatched %v", id, c, dispatched[id.String()])
		}
		want := persistence.JobCancelled
		if !c {
			want = persistence.JobFinished
		}
		f.obs.reached(t, id, want)
	}
}

// hangingRenderer blocks until its render is cancelled, or ends as told.
type hangingRenderer struct {
	started chan *renderer.Task
	results chan error
}

func (r *hangingRenderer) Engine() string { return "test" }

func (r *hangingRenderer) Render(ctx context.Context, task *renderer.Task, _ func(float64)) error {
	r.started <- task
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-r.results:
		return err
	}
}

// TestSilentRenderIsRequeuedOnTheInjectedClock: a render that reports nothing for the silence
// limit is stopped and its job queued again; no test time passes.
func TestSilentRenderIsRequeuedOnTheInjectedClock(t *testing.T) {
	f := newFixture(t, actors.Config{SilenceTimeout: 10 * time.Minute, MaxAttempts: 3, NodeLease: 24 * time.Hour})
	r := &hangingRenderer{started: make(chan *renderer.Task, 10), results: make(chan error, 10)}
	agent, err := node.New(node.Config{NodeID: "embedded", Slots: 1, DataDir: t.TempDir()}, []renderer.Renderer{r},
		node.Transfers{Internal: http.DefaultClient, External: http.DefaultClient}, f.clock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)
	f.runAgent(agent)
	id := f.queue(f.team, 0, 1)[0]
	first := <-r.started
	f.advanceWhenArmed(10 * time.Minute)
	second := <-r.started
	if first.Attempt != 1 || second.Attempt != 2 {
		t.Fatalf("attempts %d then %d", first.Attempt, second.Attempt)
	}
	r.results <- errors.New("the template is broken")
	f.obs.reached(t, id, persistence.JobFailed)
	j := f.job(id)
	if len(j.Failures) != 2 || j.Failures[0].Error != "the render reported no progress for 10m0s" || j.Error != "the template is broken" {
		t.Fatalf("job %+v", j)
	}
}

// TestTerminalJobActorsPassivateAndComeBack: a finished job's actor stops as soon as it is idle
// (no timer); a later message starts it again from the store, and it stops again once answered.
func TestTerminalJobActorsPassivateAndComeBack(t *testing.T) {
	f := newFixture(t, actors.Config{PassivateAfter: time.Minute})
	n := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	a := n.next(t)
	a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: 1})
	f.obs.reached(t, id, persistence.JobFinished)
	f.obs.until(t, "the first passivation", func() bool { return f.obs.stopped[id] == 1 })
	if live := f.coord.LiveJobActors(); live != 0 {
		t.Fatalf("%d live job actors after passivation", live)
	}
	out, err := f.coord.CancelJobs([]ulid.ULID{id}, "")
	if err != nil || len(out.Cancelled) != 0 || out.Reached[id].State != persistence.JobFinished {
		t.Fatalf("cancel of a passivated finished job: %+v, %v", out, err)
	}
	f.obs.until(t, "the second passivation", func() bool { return f.obs.stopped[id] == 2 })
	if live := f.coord.LiveJobActors(); live != 0 {
		t.Fatalf("%d live job actors once the cancel was answered", live)
	}
}

// TestBatchCancelLeavesNoRecordsBehind: once a batch cancel is answered, nothing keeps the
// records it wrote: not the batch's actor, which stays a while (it passivates once idle), through
// the cancel's finished walk (a mass cancel of 1,000-job batches kept two seconds' worth of them,
// about 70,000 records, in memory that way), nor the store's committer through its last commit.
func TestBatchCancelLeavesNoRecordsBehind(t *testing.T) {
	f := newFixture(t, actors.Config{PassivateAfter: time.Hour})
	batch := &persistence.Batch{ID: f.ids.New(f.clock.Now()), TeamID: f.team, CreatedAt: f.clock.Now()}
	var jobs []*persistence.Job
	for i := range 3 {
		id := f.ids.New(f.clock.Now())
		jobs = append(jobs, &persistence.Job{ID: id, TeamID: f.team, BatchID: batch.ID, BatchIndex: i, Kind: persistence.KindRender,
			Engine: "test", State: persistence.JobQueued, OutputName: id.String() + ".mp4", CreatedAt: f.clock.Now()})
		batch.Jobs = append(batch.Jobs, persistence.BatchEntry{Index: i, JobID: id})
	}
	batch.Total = len(jobs)
	if err := f.coord.CreateBatch(batch, jobs, nil); err != nil {
		t.Fatal(err)
	}
	out, err := f.coord.CancelBatch(batch.ID, "")
	if err != nil || len(out.Cancelled) != len(jobs) {
		t.Fatalf("batch cancel: %+v, %v", out, err)
	}
	collected := make(chan ulid.ULID, len(jobs))
	for _, j := range out.Cancelled {
		runtime.SetFinalizer(j, func(j *persistence.Job) { collected <- j.ID })
	}
	out = nil
	f.obs.until(t, "the cancelled jobs' actors to passivate", func() bool { return f.coord.LiveJobActors() == 0 })
	gone := 0
	for range 100 {
		runtime.GC()
		select {
		case <-collected:
			gone++
		case <-time.After(10 * time.Millisecond):
		}
		if gone == len(jobs) {
			return
		}
	}
	t.Fatalf("%d of the %d cancelled records still reachable while the batch's actor idles", len(jobs)-gone, len(jobs))
}

// TestWebhookRetriesFollowTheBackoffOnTheInjectedClock: a failed delivery is tried again only
// when the clock reaches its backoff (±20% jitter), with the same delivery id.
func TestWebhookRetriesFollowTheBackoffOnTheInjectedClock(t *testing.T) {
	f := newFixture(t, actors.Config{WebhookBackoff: []time.Duration{10 * time.Second, 40 * time.Second}})
	var mu sync.Mutex
	var calls []string
	statuses := []int{500, 502, 200}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Header.Get("X-Webhook-Id"))
		w.WriteHeader(statuses[len(calls)-1])
	}))
	defer srv.Close()
	callCount := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }

	n := f.attachTestNode("n1", 1)
	// The webhook is signed with its team's secret.
	issued := &persistence.IssueToken{At: f.clock.Now(), TeamName: "t", NewTeamID: f.ids.New(f.clock.Now()), WebhookSecret: "cafe"}
	if err := f.store.Apply(issued); err != nil {
		t.Fatal(err)
	}
	team := issued.Team
	id := f.ids.New(f.clock.Now())
	job := &persistence.Job{ID: id, TeamID: team.ID, Kind: persistence.KindRender, Engine: "test", State: persistence.JobQueued,
		OutputName: "out.mp4", Spec: persistence.JobSpec{Webhook: &persistence.Webhook{URL: srv.URL}}}
	if err := f.coord.CreateJobs([]*persistence.Job{job}, nil); err != nil {
		t.Fatal(err)
	}
	a := n.next(t)
	a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: 1})
	f.obs.until(t, "the first attempt", func() bool { return len(f.obs.hooks[id]) == 1 })
	for i, backoff := range []time.Duration{10 * time.Second, 40 * time.Second} {
		armed := <-f.clock.Armed
		for armed < backoff*8/10 || armed > backoff*12/10 {
			armed = <-f.clock.Armed
		}
		if got := callCount(); got != i+1 {
			t.Fatalf("%d calls before the clock reached the backoff, want %d", got, i+1)
		}
		f.clock.Advance(armed)
		f.obs.until(t, "the next attempt", func() bool { return len(f.obs.hooks[id]) == i+2 })
	}
	if got := f.obs.hooks[id]; !slices.Equal(got, []string{"retrying", "retrying", "delivered"}) {
		t.Fatalf("attempts %v", got)
	}
	if calls[0] == "" || calls[0] != calls[1] || calls[1] != calls[2] {
		t.Fatalf("delivery ids %v", calls)
	}
}

// TestQueueComesBackInOrderAfterARestart: queued jobs have no actor, before or after a restart,
// and the queue rebuilt from the store's index dispatches in the order it had: each team's jobs
// by priority, then age; between teams holding as many slots, the older job first (a team's
// priority never ranks another team's jobs).
func TestQueueComesBackInOrderAfterARestart(t *testing.T) {
	f := newFixture(t, actors.Config{})
	teamB := f.ids.New(f.clock.Now())
	old := f.queue(f.team, 0, 3)
	urgent := f.queue(f.team, 9, 1)
	low := f.queue(f.team, -1, 1)
	other := f.queue(teamB, 0, 1)
	f.waitQueued(6)
	if live := f.coord.LiveJobActors(); live != 0 {
		t.Fatalf("%d job actors for queued jobs, want none", live)
	}
	f.restart()
	f.waitQueued(6)
	if live := f.coord.LiveJobActors(); live != 0 {
		t.Fatalf("%d job actors for queued jobs after a restart, want none", live)
	}
	n := f.attachTestNode("n1", 1)
	// One slot, freed before the next pick: no team holds more than another, so the age of each
	// team's best job decides between the teams.
	for _, want := range []ulid.ULID{urgent[0], old[0], old[1], old[2], low[0], other[0]} {
		a := n.next(t)
		if a.msg.JobID != want.String() {
			t.Fatalf("got %s, want %s", a.msg.JobID, want)
		}
		a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: a.msg.Attempt})
	}
}

// TestLargeQueueComesBackWhole: a queue larger than one chunk of a start's restore comes back
// whole, and its most urgent job, read last, is still picked first.
func TestLargeQueueComesBackWhole(t *testing.T) {
	f := newFixture(t, actors.Config{})
	const bulk = 10_000 // more than two chunks
	old := f.queue(f.team, 0, bulk)
	urgent := f.queue(f.team, 9, 1)
	f.restart()
	f.waitQueued(bulk + 1)
	n := f.attachTestNode("n1", 1)
	for _, want := range []ulid.ULID{urgent[0], old[0], old[1]} {
		a := n.next(t)
		if a.msg.JobID != want.String() {
			t.Fatalf("got %s, want %s", a.msg.JobID, want)
		}
		a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: a.msg.Attempt})
	}
}

// TestRequeuedJobPassivatesAndIsOfferedFromTheStore: a job queued again after a lost attempt
// lets its actor go while it waits; the next offer activates it from the store, which carries
// the attempt count and the node to avoid.
func TestRequeuedJobPassivatesAndIsOfferedFromTheStore(t *testing.T) {
	f := newFixture(t, actors.Config{PassivateAfter: time.Minute})
	n1 := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	first := n1.next(t)
	// n1 drains: it takes nothing more, so the requeued job waits with no node free.
	if _, err := f.coord.DrainNode("n1"); err != nil {
		t.Fatal(err)
	}
	first.reply(&protocol.Failed{JobID: id.String(), Attempt: 1, Error: "node hiccup", Retryable: true})
	f.idleUntilPassivated(id, time.Minute, 1)
	if live := f.coord.LiveJobActors(); live != 0 {
		t.Fatalf("%d live job actors while the job waits in the queue", live)
	}
	n2 := f.attachTestNode("n2", 1)
	second := n2.next(t)
	if second.msg.JobID != id.String() || second.msg.Attempt != 2 {
		t.Fatalf("second assignment %+v", second.msg)
	}
}

// TestNodeLogLinesKeepTheirTimes: the lines a node wrote while rendering reach the job's log
// with the times it wrote them; the coordinator's own lines carry the time it recorded them.
func TestNodeLogLinesKeepTheirTimes(t *testing.T) {
	// Heartbeats are not sent here: a lease long enough for the minute the clock moves.
	f := newFixture(t, actors.Config{HeartbeatInterval: 10 * time.Minute, NodeLease: time.Hour})
	n := f.attachTestNode("n1", 1)
	id := f.queue(f.team, 0, 1)[0]
	a := n.next(t)
	started := f.clock.Now()
	f.clock.Advance(time.Minute) // the render took a minute; the result arrives at its end
	a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: 1, Log: []string{"frame 1", "frame 2"},
		LogAt: []int64{started.Add(time.Second).UnixMilli(), started.Add(30 * time.Second).UnixMilli()}})
	f.obs.reached(t, id, persistence.JobFinished)
	job, err := f.store.Job(id)
	if err != nil {
		t.Fatal(err)
	}
	log := f.store.JobLog(job, f.clock.Now())
	stamp := func(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
	for _, want := range []string{
		stamp(started.Add(time.Second)) + " frame 1",
		stamp(started.Add(30*time.Second)) + " frame 2",
		stamp(f.clock.Now()) + " finished on node n1",
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestAReplicaThatNoLongerLeadsSendsNoWebhook: a coordinator whose replica no longer leads sends
// no webhook request and leaves the delivery in the outbox for the leader.
func TestAReplicaThatNoLongerLeadsSendsNoWebhook(t *testing.T) {
	asked := make(chan struct{}, 8)
	f := newFixtureWith(t, actors.Config{}, func(d *actors.Deps) {
		d.StillLeads = func() bool { asked <- struct{}{}; return false }
	})
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer srv.Close()
	n := f.attachTestNode("n1", 1)
	issued := &persistence.IssueToken{At: f.clock.Now(), TeamName: "t", NewTeamID: f.ids.New(f.clock.Now()), WebhookSecret: "cafe"}
	if err := f.store.Apply(issued); err != nil {
		t.Fatal(err)
	}
	job := &persistence.Job{ID: f.ids.New(f.clock.Now()), TeamID: issued.Team.ID, Kind: persistence.KindRender, Engine: "test",
		State: persistence.JobQueued, OutputName: "out.mp4", Spec: persistence.JobSpec{Webhook: &persistence.Webhook{URL: srv.URL}}}
	if err := f.coord.CreateJobs([]*persistence.Job{job}, nil); err != nil {
		t.Fatal(err)
	}
	a := n.next(t)
	a.reply(&protocol.Done{JobID: a.msg.JobID, Attempt: 1})
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher never asked whether it still leads")
	}
	pending, err := f.store.Deliveries()
	if err != nil || len(pending) != 1 || calls.Load() != 0 {
		t.Fatalf("outbox %d (%v), requests sent %d: want the delivery kept and nothing sent", len(pending), err, calls.Load())
	}
}

// A coordinator between terms (a replica that follows) answers every command that it does not
// lead, and finds nothing; its next term restores the queue from the records and serves again.
func TestACoordinatorBetweenTermsAnswersNotLeading(t *testing.T) {
	f := newFixture(t, actors.Config{})
	ids := f.queue(f.team, 0, 2)
	f.coord.Stop(context.Background())

	_, cancelErr := f.coord.CancelJobs(ids[:1], "")
	_, stopErr := f.coord.StopJob(ids[0], "test")
	_, statsErr := f.coord.QueueStats()
	_, tokenErr := f.coord.IssueToken("acme", time.Time{}, persistence.RoleSubmitter)
	_, drainErr := f.coord.DrainNode("n1")
	for name, err := range map[string]error{"CancelJobs": cancelErr, "StopJob": stopErr, "QueueStats": statsErr,
		"IssueToken": tokenErr, "DrainNode": drainErr,
		"CreateJobs": f.coord.CreateJobs(nil, nil), "SetLimit": f.coord.SetLimit("aerender", 1)} {
		if !errors.Is(err, actors.ErrNotLeading) || !errors.Is(err, persistence.ErrNotReplicated) {
			t.Errorf("%s between terms: %v, want ErrNotLeading", name, err)
		}
	}
	if f.coord.Nodes() != nil || f.coord.Capacities() != nil || f.coord.LiveJobActors() != 0 || f.coord.ActorSystem() != nil {
		t.Error("a coordinator between terms shows what a term held")
	}

	if err := f.coord.Start(); err != nil {
		t.Fatal(err)
	}
	if err := f.coord.Start(); err == nil {
		t.Error("a second Start during a term was taken")
	}
	out, err := f.coord.CancelJobs(ids[:1], "")
	if err != nil || len(out.Cancelled) != 1 {
		t.Fatalf("cancel in the next term: %+v, %v", out, err)
	}
	if stats, err := f.coord.QueueStats(); err != nil || stats.Depth["test"] != 1 {
		t.Errorf("the next term's queue: %+v, %v; want the one job left", stats, err)
	}
}
