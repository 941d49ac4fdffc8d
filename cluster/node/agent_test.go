package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/renderer"
)

const wait = 10 * time.Second

// gateway stands in for the coordinator's gateway actor: it challenges, welcomes, acknowledges,
// and hands every message to the test.
type gateway struct {
	pid      *actor.PID
	received chan any
	// welcomeSeq is the assignment count the next welcome tells the node to go on from.
	welcomeSeq atomic.Uint64
	// welcomes counts the welcomes; the session of the last is "s" and that count.
	welcomes atomic.Int64
	// plans: the gateway answers upload requests with a plan (else it answers none).
	plans bool
}

// testKey is the cluster key of the agents under test; internalURL their coordinator's files.
var testKey = []byte("node-test-key-0123456789")

const internalURL = "http://coordinator.test/files/"

func (g *gateway) session() string { return fmt.Sprintf("s%d", g.welcomes.Load()) }

func newGateway(t *testing.T, system *actor.ActorSystem) *gateway {
	g := &gateway{received: make(chan any, 1000)}
	g.pid = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		env, ok := ctx.Message().(*protocol.Envelope)
		if !ok {
			return
		}
		msg, err := protocol.Open(env)
		if err != nil {
			t.Errorf("the agent sent an unreadable message: %v", err)
			return
		}
		g.received <- msg
		var answer any
		switch m := msg.(type) {
		case *protocol.Hello:
			if m.Nonce == "" {
				answer = &protocol.Challenge{Nonce: fmt.Sprintf("c%d", g.welcomes.Load())}
				break
			}
			if !protocol.CheckHelloProof(testKey, m) {
				t.Errorf("the agent's hello does not prove the key: %+v", m)
			}
			g.welcomes.Add(1)
			answer = &protocol.Welcome{Accepted: true, Session: g.session(), Nonce: m.Nonce,
				Proof: protocol.WelcomeProof(testKey, m.Nonce, m.NodeID, g.session()), InternalURL: internalURL,
				HeartbeatInterval: 20 * time.Millisecond, Lease: time.Second, Seq: g.welcomeSeq.Load()}
		case *protocol.Heartbeat:
			answer = &protocol.HeartbeatAck{Known: true}
		case *protocol.Done:
			answer = &protocol.FinalAck{Session: g.session(), JobID: m.JobID, Attempt: m.Attempt}
		case *protocol.Failed:
			answer = &protocol.FinalAck{Session: g.session(), JobID: m.JobID, Attempt: m.Attempt}
		case *protocol.Bye:
			answer = &protocol.Ack{Kind: "bye"}
		case *protocol.UploadRequest:
			if g.plans {
				plan := &protocol.UploadPlan{UploadID: "u-" + g.session()}
				for range m.PartMD5 {
					plan.Parts = append(plan.Parts, protocol.PartTarget{URL: internalURL + "part"})
				}
				answer = plan
			}
		}
		if answer != nil && ctx.Sender() != nil {
			ctx.Respond(protocol.Wrap(answer))
		}
	}))
	return g
}

// next returns the next message of type T, skipping others.
func next[T any](t *testing.T, g *gateway, match func(T) bool) T {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case msg := <-g.received:
			if m, ok := msg.(T); ok && (match == nil || match(m)) {
				return m
			}
		case <-deadline:
			var zero T
			t.Fatalf("no %T from the agent", zero)
			return zero
		}
	}
}

// joined waits until the agent has said hello, answered the challenge and, welcomed, sent its
// first heartbeat: a coordinator assigns nothing before it has welcomed the node. One answered
// hello is enough: each would be welcomed with a new session.
func joined(t *testing.T, g *gateway) *protocol.Heartbeat {
	t.Helper()
	answered := 0
	hb := next(t, g, func(msg any) bool {
		if h, ok := msg.(*protocol.Hello); ok && h.Nonce != "" {
			answered++
		}
		_, ok := msg.(*protocol.Heartbeat)
		return ok
	})
	if answered != 1 {
		t.Fatalf("the agent answered %d challenges before its first heartbeat", answered)
	}
	return hb.(*protocol.Heartbeat)
}

// blockingRenderer renders until released or cancelled.
type blockingRenderer struct {
	started chan string
	release chan struct{}
}

func (r *blockingRenderer) Engine() string { return "test" }

func (r *blockingRenderer) Render(ctx context.Context, task *renderer.Task, _ func(float64)) error {
	r.started <- task.JobID
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.release:
		return os.WriteFile(task.OutputPath, []byte("frames"), 0o600)
	}
}

func startAgent(t *testing.T, dataDir string, r renderer.Renderer) (*Agent, *gateway) {
	t.Helper()
	return startAgentOn(t, dataDir, r, clock.Real{})
}

// startAgentOn is startAgent on clk.
func startAgentOn(t *testing.T, dataDir string, r renderer.Renderer, clk clock.Clock) (*Agent, *gateway) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	g := newGateway(t, system)
	a, err := New(Config{NodeID: "n1", Slots: 1, DataDir: dataDir, ClusterKey: testKey}, []renderer.Renderer{r},
		Transfers{Internal: http.DefaultClient, External: http.DefaultClient}, clk, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(system, "agent"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		a.Stop()
		system.Shutdown()
	})
	a.Connect(g.pid)
	go a.Run(ctx)
	return a, g
}

// assign sends an assignment under the gateway's last session.
func assign(g *gateway, a *Agent, seq uint64, job string) {
	a.system.Root.Send(a.self, protocol.Wrap(&protocol.Assign{Session: g.session(), Seq: seq, JobID: job, Attempt: 1,
		Task: protocol.Task{Engine: "test", Output: protocol.Output{Name: "out.mp4"}}}))
}

// TestInterruptedAttemptIsReportedAfterRestart: an attempt a crash interrupted (its marker is
// left on disk) is reported lost by the next run of the node, resent until acknowledged, then
// forgotten.
func TestInterruptedAttemptIsReportedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "attempts"), 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "attempts", "01JOB.2")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, g := startAgent(t, dir, &blockingRenderer{started: make(chan string, 1), release: make(chan struct{})})
	hello := next[*protocol.Hello](t, g, nil)
	if len(hello.Running) != 1 || hello.Running[0].JobID != "01JOB" || hello.Running[0].Attempt != 2 || hello.Running[0].Percent != 100 {
		t.Fatalf("hello holds %+v", hello.Running)
	}
	f := next[*protocol.Failed](t, g, nil)
	if f.JobID != "01JOB" || f.Attempt != 2 || !f.Retryable || f.NotStarted {
		t.Fatalf("report %+v", f)
	}
	next[*protocol.Heartbeat](t, g, func(hb *protocol.Heartbeat) bool { return len(hb.Running) == 0 })
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the marker outlived the acknowledgement: %v", err)
	}
}

// TestAgentRefusesBeyondItsSlotsAndAbandons: an assignment beyond the node's slots is refused as
// never started; an abandoned render stops and reports nothing, and its slot is free at once.
func TestAgentRefusesBeyondItsSlotsAndAbandons(t *testing.T) {
	r := &blockingRenderer{started: make(chan string, 2), release: make(chan struct{})}
	a, g := startAgent(t, t.TempDir(), r)
	joined(t, g)
	assign(g, a, 1, "A")
	<-r.started
	assign(g, a, 2, "B")
	refused := next[*protocol.Failed](t, g, nil)
	if refused.JobID != "B" || !refused.NotStarted {
		t.Fatalf("refusal %+v", refused)
	}
	hb := next[*protocol.Heartbeat](t, g, func(hb *protocol.Heartbeat) bool { return hb.Seq == 2 })
	if len(hb.Running) != 1 || hb.Running[0].JobID != "A" {
		t.Fatalf("heartbeat holds %+v", hb.Running)
	}
	a.system.Root.Send(a.self, protocol.Wrap(&protocol.Abandon{Session: g.session(), JobID: "A", Attempt: 1, Reason: "withdrawn"}))
	assign(g, a, 3, "C")
	if started := <-r.started; started != "C" {
		t.Fatalf("started %s", started)
	}
	next[*protocol.Heartbeat](t, g, func(hb *protocol.Heartbeat) bool {
		return hb.Seq == 3 && len(hb.Running) == 1 && hb.Running[0].JobID == "C"
	})
	close(r.release)
	select {
	case msg := <-g.received:
		if d, ok := msg.(*protocol.Done); ok && d.JobID == "A" {
			t.Fatal("an abandoned attempt reported done")
		}
	default:
	}
}

// TestAgentAnswersUnknownKinds: a newer coordinator's message kind is answered with an error
// and the node goes on working.
func TestAgentAnswersUnknownKinds(t *testing.T) {
	r := &blockingRenderer{started: make(chan string, 1), release: make(chan struct{})}
	a, g := startAgent(t, t.TempDir(), r)
	joined(t, g)
	res, err := a.system.Root.RequestFuture(a.self, &protocol.Envelope{Kind: "rebalance", Version: 4}, wait).Result()
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := protocol.Open(res.(*protocol.Envelope)); err != nil || msg.(*protocol.Error).Kind != "rebalance" {
		t.Fatalf("answer %+v %v", msg, err)
	}
	assign(g, a, 1, "A")
	if started := <-r.started; started != "A" {
		t.Fatalf("started %s", started)
	}
}

// TestWelcomeSetsTheAssignmentCount: the node counts assignments on from its welcome's count,
// and from 0 again when a restarted coordinator welcomes it.
func TestWelcomeSetsTheAssignmentCount(t *testing.T) {
	r := &blockingRenderer{started: make(chan string, 1), release: make(chan struct{})}
	dir := t.TempDir()
	a, g := startAgent(t, dir, r)
	if hb := joined(t, g); hb.Seq != 0 {
		t.Fatalf("first heartbeat counts %d assignments", hb.Seq)
	}
	g.welcomeSeq.Store(7)
	a.Reconnect()
	if hb := joined(t, g); hb.Seq != 7 {
		t.Fatalf("heartbeat after a welcome at 7 counts %d", hb.Seq)
	}
	assign(g, a, 8, "A")
	<-r.started
	next[*protocol.Heartbeat](t, g, func(hb *protocol.Heartbeat) bool { return hb.Seq == 8 })
	g.welcomeSeq.Store(0)
	a.Reconnect()
	if hb := joined(t, g); hb.Seq != 0 || len(hb.Running) != 1 {
		t.Fatalf("heartbeat after a restarted coordinator's welcome: seq %d holding %+v", hb.Seq, hb.Running)
	}
}

// TestAgentTakesWorkOnlyFromItsWelcomer: an assignment or an abandon without the session of the
// node's welcome is refused; a welcome or a challenge answering no hello of the node changes
// nothing; an assignment whose internal files are not the coordinator's is refused unstarted.
func TestAgentTakesWorkOnlyFromItsWelcomer(t *testing.T) {
	r := &blockingRenderer{started: make(chan string, 2), release: make(chan struct{})}
	a, g := startAgent(t, t.TempDir(), r)
	joined(t, g)
	send := func(msg any) { a.system.Root.Send(a.self, protocol.Wrap(msg)) }
	task := protocol.Task{Engine: "test", Output: protocol.Output{Name: "out.mp4"}}
	send(&protocol.Assign{Session: "guessed", Seq: 1, JobID: "FORGED", Attempt: 1, Task: task})
	send(&protocol.Welcome{Accepted: true, Session: "stolen", Nonce: "c0", HeartbeatInterval: time.Millisecond})
	send(&protocol.Challenge{Nonce: "unasked"})
	send(&protocol.Assign{Session: "stolen", Seq: 1, JobID: "FORGED", Attempt: 1, Task: task})
	outside := task
	outside.Template = &protocol.Source{URL: "http://127.0.0.1:22/secrets", Internal: true}
	send(&protocol.Assign{Session: g.session(), Seq: 1, JobID: "OUTSIDE", Attempt: 1, Task: outside})
	refused := next[*protocol.Failed](t, g, nil)
	if refused.JobID != "OUTSIDE" || !refused.NotStarted || !strings.Contains(refused.Error, "not one of the coordinator's files") {
		t.Fatalf("refusal %+v", refused)
	}
	assign(g, a, 2, "A")
	if started := <-r.started; started != "A" {
		t.Fatalf("started %s", started)
	}
	send(&protocol.Abandon{Session: "guessed", JobID: "A", Attempt: 1})
	hb := next[*protocol.Heartbeat](t, g, func(hb *protocol.Heartbeat) bool { return hb.Seq == 2 })
	if len(hb.Running) != 1 || hb.Running[0].JobID != "A" || hb.Session != g.session() {
		t.Fatalf("after forged messages the node holds %+v under session %q", hb.Running, hb.Session)
	}
	if hellos := g.welcomes.Load(); hellos != 1 {
		t.Fatalf("the node was welcomed %d times", hellos)
	}
}

// TestAnUploadPlanFollowsTheNextCoordinator: a node asks the coordinator that welcomed it where
// to put an output; that coordinator goes silent (killed) and the node turns to the next one
// (another replica leads): the question is asked of the next as soon as it welcomed the node,
// without waiting out the silent one's time to answer (the agent's clock never moves here).
func TestAnUploadPlanFollowsTheNextCoordinator(t *testing.T) {
	a, silent := startAgentOn(t, t.TempDir(), &blockingRenderer{started: make(chan string, 1), release: make(chan struct{})},
		clock.NewFake(time.Now()))
	joined(t, silent)
	type answer struct {
		plan *protocol.UploadPlan
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		plan, err := a.askUploadPlan(context.Background(), &protocol.UploadRequest{JobID: "01JOB", Attempt: 1, Name: "out.mp4", Size: 1,
			PartMD5: []string{"md5"}})
		answers <- answer{plan, err}
	}()
	next[*protocol.UploadRequest](t, silent, nil)
	nextOne := newGateway(t, a.system)
	nextOne.plans = true
	a.Connect(nextOne.pid)
	// Well within the silent coordinator's 10 s to answer: the question no longer waits on it.
	select {
	case got := <-answers:
		if got.err != nil || got.plan.UploadID != "u-s1" {
			t.Fatalf("plan %+v, %v; want the next coordinator's, under its welcome", got.plan, got.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the question waited on the coordinator that went silent")
	}
}
