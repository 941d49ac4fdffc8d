// Package node is a render node: an actor that takes assignments from the coordinator, stages
// each job's files, runs the job's engine, uploads the output and reports back. The coordinator's
// embedded node and remote nodes run this same code; nothing assumes a shared filesystem, every
// file crosses by URL.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/secrets"
)

// Config describes a node.
type Config struct {
	NodeID  string
	Slots   int
	Version string
	Labels  map[string]string
	// RequireTags makes the node take only jobs tagged with every one of them.
	RequireTags []string
	// Pools are the pools the node belongs to.
	Pools []string
	// ClusterKey proves the node's membership to the coordinator (empty when it runs alone).
	ClusterKey []byte
	// DataDir holds the node's working directories, template cache and attempt markers.
	DataDir string
	// ProgressInterval is the most often progress is reported [250ms].
	ProgressInterval time.Duration
	// MaxDownloadBytes caps any one file the node downloads [2 GiB].
	MaxDownloadBytes int64
	// DownloadTimeout bounds the download of any one file, body included [30m].
	DownloadTimeout time.Duration
	// MaxLogLines caps the render log lines sent with a report [2000].
	MaxLogLines int
	// OnAcknowledged, when set, hears of each result the coordinator acknowledged (a test
	// signal; nil in production).
	OnAcknowledged func(jobID string, attempt int)
}

// Agent runs renders for the coordinator. Its actor takes every message of the coordinator
// (assignments, abandons, and the answers to the node's own messages), in the order sent; Run
// keeps the link alive (hello, heartbeats, results resent until acknowledged). The link's rules
// are its linkBook's.
type Agent struct {
	cfg         Config
	renderers   map[string]renderer.Renderer
	files       *fileMover
	clock       clock.Clock
	log         *slog.Logger
	incarnation string

	// ctx ends when the node shuts down; renders it interrupts are not reported (their markers
	// stay, and the next start of the node reports them as lost).
	ctx      context.Context
	shutdown context.CancelFunc
	wg       sync.WaitGroup

	system *actor.ActorSystem
	self   *actor.PID
	// wake makes Run act at once (coordinator found, result to send, drain asked).
	wake chan struct{}

	mu          sync.Mutex
	coordinator *actor.PID
	// linkChanged is closed, and replaced, each time Connect points the node at a coordinator
	// and each time one welcomes it: a question waiting on the last one is asked again.
	linkChanged chan struct{}
	// book holds the link's state and rules (link_book.go).
	book    *linkBook
	running map[attemptKey]*attemptRun
	// refusals throttles the log lines of messages refused as someone else's.
	refusals clock.Throttle
	// idle is signalled whenever the node holds no attempt (Drain waits on it).
	idle chan struct{}
}

type attemptKey struct {
	jobID   string
	attempt int
}

func (k attemptKey) less(o attemptKey) bool {
	if k.jobID != o.jobID {
		return k.jobID < o.jobID
	}
	return k.attempt < o.attempt
}

type attemptRun struct {
	cancel    context.CancelCauseFunc
	percent   float64
	abandoned bool
}

// New makes an agent for the given renderers. internal fetches from and uploads to the
// coordinator; external reaches the URLs users gave and refuses private addresses unless
// configured otherwise. Attempts a previous run of the node left unfinished are queued as lost,
// to be reported once the coordinator is reached.
func New(cfg Config, renderers []renderer.Renderer, files Transfers, clk clock.Clock, log *slog.Logger) (*Agent, error) {
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = 250 * time.Millisecond
	}
	if cfg.MaxDownloadBytes == 0 {
		cfg.MaxDownloadBytes = 2 << 30
	}
	if cfg.DownloadTimeout == 0 {
		cfg.DownloadTimeout = 30 * time.Minute
	}
	if cfg.MaxLogLines == 0 {
		cfg.MaxLogLines = 2000
	}
	if cfg.NodeID == "" || cfg.Slots < 1 {
		return nil, fmt.Errorf("a render node needs an id and at least one slot (id %q, %d slots)", cfg.NodeID, cfg.Slots)
	}
	// Engines hand paths to programs running elsewhere (the Lottie worker, After Effects).
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dataDir
	for _, dir := range []string{workRoot(cfg), cacheRoot(cfg), markerRoot(cfg)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	byEngine := make(map[string]renderer.Renderer, len(renderers))
	for _, r := range renderers {
		byEngine[r.Engine()] = r
	}
	engines := make([]string, 0, len(byEngine))
	for e := range byEngine {
		engines = append(engines, e)
	}
	sort.Strings(engines)
	incarnation := ulid.Make().String()
	base := protocol.Hello{NodeID: cfg.NodeID, Incarnation: incarnation, Engines: engines, Slots: cfg.Slots,
		Version: cfg.Version, Labels: cfg.Labels, RequireTags: cfg.RequireTags, Pools: cfg.Pools, Machine: thisMachine(),
		Fonts: installedFonts(systemFontDirs())}
	ctx, shutdown := context.WithCancel(context.Background())
	a := &Agent{
		cfg: cfg, renderers: byEngine, clock: clk, log: log.With("node", cfg.NodeID),
		files:       &fileMover{Transfers: files, cacheDir: cacheRoot(cfg), maxBytes: cfg.MaxDownloadBytes, timeout: cfg.DownloadTimeout, clock: clk, log: log},
		incarnation: incarnation,
		ctx:         ctx, shutdown: shutdown, wake: make(chan struct{}, 1), idle: make(chan struct{}, 1), linkChanged: make(chan struct{}),
		book: newLinkBook(base, cfg.ClusterKey), running: make(map[attemptKey]*attemptRun),
		refusals: clock.Throttle{Period: 10 * time.Second},
	}
	interrupted, err := a.readMarkers()
	if err != nil {
		return nil, err
	}
	for _, k := range interrupted {
		a.log.Warn("an attempt was interrupted by the node's restart; reporting it lost", "job", k.jobID, "attempt", k.attempt)
	}
	a.book.afterCrash(interrupted)
	return a, nil
}

func workRoot(cfg Config) string   { return filepath.Join(cfg.DataDir, "work") }
func cacheRoot(cfg Config) string  { return filepath.Join(cfg.DataDir, "cache", "templates") }
func markerRoot(cfg Config) string { return filepath.Join(cfg.DataDir, "attempts") }

// markerPath is the file that says an attempt is held by this node; it outlives a crash.
func (a *Agent) markerPath(k attemptKey) string {
	return filepath.Join(markerRoot(a.cfg), fmt.Sprintf("%s.%d", safeName(k.jobID), k.attempt))
}

// readMarkers lists the attempts a previous run of the node held when it stopped (their markers
// outlive a crash); unreadable markers are removed.
func (a *Agent) readMarkers() ([]attemptKey, error) {
	entries, err := os.ReadDir(markerRoot(a.cfg))
	if err != nil {
		return nil, err
	}
	var keys []attemptKey
	for _, e := range entries {
		jobID, attemptText, ok := strings.Cut(e.Name(), ".")
		attempt, err := strconv.Atoi(attemptText)
		if !ok || err != nil || attempt < 1 {
			os.Remove(filepath.Join(markerRoot(a.cfg), e.Name()))
			continue
		}
		keys = append(keys, attemptKey{jobID, attempt})
	}
	return keys, nil
}

// Incarnation names this run of the node process.
func (a *Agent) Incarnation() string { return a.incarnation }

// Hello is how the node introduces itself (without a challenge's nonce).
func (a *Agent) Hello() *protocol.Hello {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.book.hello(a.runningLocked())
}

// runningLocked lists the attempts the node renders (an abandoned one no longer counts).
func (a *Agent) runningLocked() []protocol.AttemptStatus {
	out := make([]protocol.AttemptStatus, 0, len(a.running))
	for k, r := range a.running {
		if !r.abandoned {
			out = append(out, protocol.AttemptStatus{JobID: k.jobID, Attempt: k.attempt, Percent: r.percent})
		}
	}
	return out
}

// AgentName is the name of a node process's agent actor, which the coordinator addresses.
const AgentName = "framefarm-agent"

// Start spawns the agent's actor in system under name (so a remote coordinator can address it).
func (a *Agent) Start(system *actor.ActorSystem, name string) error {
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(a.receive), name)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.system, a.self = system, pid
	a.book.base.AgentAddress, a.book.base.AgentID = pid.Address, pid.Id
	a.mu.Unlock()
	return nil
}

// Stop interrupts every render and waits for them to end. Their attempt markers stay: the next
// start of the node reports them lost, unless ForgetInterrupted is called.
func (a *Agent) Stop() {
	a.shutdown()
	a.wg.Wait()
}

// ForgetInterrupted removes the markers Stop left, for a node whose coordinator knows its renders
// were interrupted (the embedded node, which stops with it).
func (a *Agent) ForgetInterrupted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.book.finals)
	if err := os.RemoveAll(markerRoot(a.cfg)); err != nil {
		a.log.Warn("cannot remove the attempt markers", "err", err)
	}
}

func (a *Agent) receive(ctx actor.Context) {
	env, ok := ctx.Message().(*protocol.Envelope)
	if !ok {
		return // the actor's own lifecycle messages
	}
	msg, err := protocol.Open(env)
	if err != nil {
		a.log.Warn("refused a message from the coordinator", "err", err)
		if ctx.Sender() != nil {
			ctx.Respond(protocol.Wrap(&protocol.Error{Kind: env.GetKind(), Message: err.Error()}))
		}
		return
	}
	from := senderOf(ctx)
	switch m := msg.(type) {
	case *protocol.Assign:
		if a.fromWelcomer(from, m.Session, "assignment") {
			a.assign(m)
		}
	case *protocol.Abandon:
		if a.fromWelcomer(from, m.Session, "abandon") {
			a.abandon(m)
		}
	case *protocol.Challenge:
		a.challenged(m, from)
	case *protocol.Welcome:
		a.welcome(m, from)
	case *protocol.HeartbeatAck:
		a.heartbeatAnswered(m, from)
	case *protocol.FinalAck:
		a.acknowledged(m, from)
	case *protocol.SelfTest:
		if a.fromWelcomer(from, m.Session, "self-test") {
			go a.selfTest(m)
		}
	default:
		a.log.Warn("ignored a message the coordinator should not send", "kind", env.GetKind())
	}
}

func senderOf(ctx actor.Context) sender {
	p, remote := protocol.PeerOf(ctx)
	return sender{peer: p, remote: remote}
}

// fromWelcomer accepts a message only from the coordinator that welcomed the node, under the
// session of that welcome; anything else is someone else's, refused and logged.
func (a *Agent) fromWelcomer(from sender, session, what string) bool {
	a.mu.Lock()
	ok := a.book.fromWelcomer(session, from)
	a.mu.Unlock()
	if !ok {
		a.refused("refused an "+what+" that does not come from the coordinator that welcomed this node", from)
	}
	return ok
}

// refused logs a message refused as someone else's, at most once per throttle period.
func (a *Agent) refused(line string, from sender) {
	if pass, held := a.refusals.Allow(line, a.clock.Now()); pass {
		a.log.Warn(line, "from", from.describe(), "refused_since_last_line", held)
	}
}

func (a *Agent) assign(m *protocol.Assign) {
	k := attemptKey{m.JobID, m.Attempt}
	r := a.renderers[m.Task.Engine]
	a.mu.Lock()
	a.book.onAssigned(m.Seq)
	_, busy := a.running[k]
	urlErr := checkInternalURLs(&m.Task, a.book.internalURL)
	refusal := ""
	switch {
	case busy:
		a.mu.Unlock()
		return // the same attempt assigned twice: the first one reports
	case urlErr != nil:
		refusal = urlErr.Error()
	case r == nil:
		refusal = fmt.Sprintf("this node has no %q engine", m.Task.Engine)
	case a.book.draining:
		refusal = "the node is draining"
	case a.busySlotsLocked() >= a.cfg.Slots:
		refusal = "the node has no free render slot"
	}
	if refusal != "" {
		a.mu.Unlock()
		a.finish(k, &protocol.Failed{JobID: m.JobID, Attempt: m.Attempt, Error: refusal, Retryable: true, NotStarted: true})
		return
	}
	ctx, cancel := context.WithCancelCause(a.ctx)
	a.running[k] = &attemptRun{cancel: cancel}
	a.mu.Unlock()
	if err := os.WriteFile(a.markerPath(k), nil, 0o600); err != nil {
		a.log.Warn("cannot record an attempt marker", "err", err)
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer cancel(nil)
		final := a.run(ctx, cancel, m, r)
		a.mu.Lock()
		abandoned := a.running[k].abandoned
		delete(a.running, k)
		a.mu.Unlock()
		switch {
		case a.ctx.Err() != nil:
			// The node is stopping: the marker stays, the next start reports the attempt lost.
		case abandoned || final == nil:
			os.Remove(a.markerPath(k))
			a.signalIdle()
		default:
			a.finish(k, final)
		}
	}()
}

// busySlotsLocked counts the renders holding a slot; an abandoned one gives its slot back at
// once, while its process winds down.
func (a *Agent) busySlotsLocked() int {
	n := 0
	for _, r := range a.running {
		if !r.abandoned {
			n++
		}
	}
	return n
}

// abandon stops an attempt the coordinator no longer wants; nothing more is reported of it.
func (a *Agent) abandon(m *protocol.Abandon) {
	k := attemptKey{m.JobID, m.Attempt}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.running[k]; r != nil && !r.abandoned {
		r.abandoned = true
		r.cancel(errAbandoned)
		a.log.Info("abandoned an attempt: its render stops", "job", m.JobID, "attempt", m.Attempt, "reason", m.Reason)
	}
	// A result the render just produced is dropped unsent: the coordinator would reject it.
	if a.book.dropFinal(k) {
		os.Remove(a.markerPath(k))
		a.log.Info("abandoned an attempt: its result is dropped", "job", m.JobID, "attempt", m.Attempt, "reason", m.Reason)
	}
}

// askUploadPlan asks the coordinator that welcomed the node where to put an output in the
// farm's bucket.
func (a *Agent) askUploadPlan(ctx context.Context, req *protocol.UploadRequest) (*protocol.UploadPlan, error) {
	// The coordinator may be out of reach for a moment (it restarted, or another replica took
	// over and the node has yet to find it): the question is asked again, of the coordinator
	// that welcomed the node last, until uploadPlanPatience runs out. A question to one that
	// no longer answers ends as soon as the node turns to another.
	deadline := a.clock.Now().Add(uploadPlanPatience)
	for {
		a.mu.Lock()
		coordinator, system, changed, welcomed := a.coordinator, a.system, a.linkChanged, a.book.welcomed
		a.book.stamp(req)
		base := a.book.internalURL
		a.mu.Unlock()
		err := errors.New("the coordinator is out of reach")
		if coordinator != nil && welcomed {
			var plan *protocol.UploadPlan
			if plan, err = a.uploadPlanOf(ctx, system, coordinator, req, base, changed); err == nil {
				return plan, nil
			}
			var refused planRefused
			if errors.As(err, &refused) {
				return nil, err
			}
		}
		left := deadline.Sub(a.clock.Now())
		if left <= 0 {
			return nil, err
		}
		waited := make(chan struct{})
		timer := a.clock.AfterFunc(min(left, time.Second), func() { close(waited) })
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-changed:
			timer.Stop()
		case <-waited:
		}
	}
}

// planRefused is an upload plan the coordinator refused, or one that cannot be used: asking
// again changes nothing.
type planRefused struct{ error }

// uploadPlanOf asks one coordinator for an upload plan; the wait for its answer ends early when
// changed closes (the node turned to another coordinator, or was welcomed again).
func (a *Agent) uploadPlanOf(ctx context.Context, system *actor.ActorSystem, coordinator *actor.PID, req *protocol.UploadRequest, base string,
	changed <-chan struct{}) (*protocol.UploadPlan, error) {
	// The wait is timed on the agent's clock; the future's own timeout only ends its goroutine.
	future := system.Root.RequestFuture(coordinator, protocol.Wrap(req), uploadPlanPatience)
	answered, expired := make(chan struct{}), make(chan struct{})
	var res any
	var err error
	go func() {
		res, err = future.Result()
		close(answered)
	}()
	timer := a.clock.AfterFunc(uploadPlanAsk, func() { close(expired) })
	defer timer.Stop()
	select {
	case <-answered:
	case <-expired:
		return nil, errors.New("the coordinator did not answer in time")
	case <-changed:
		return nil, errors.New("the node turned to another coordinator before an answer came")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("the coordinator did not answer: %w", err)
	}
	env, ok := res.(*protocol.Envelope)
	if !ok {
		return nil, planRefused{fmt.Errorf("the coordinator answered a %T", res)}
	}
	msg, err := protocol.Open(env)
	if err != nil {
		return nil, planRefused{err}
	}
	plan, ok := msg.(*protocol.UploadPlan)
	switch {
	case !ok:
		return nil, planRefused{fmt.Errorf("the coordinator answered a %s, not an upload plan", env.GetKind())}
	case plan.Error != "":
		return nil, planRefused{errors.New(plan.Error)}
	case len(plan.Parts) != len(req.PartMD5):
		return nil, planRefused{fmt.Errorf("the upload plan has %d parts for %d", len(plan.Parts), len(req.PartMD5))}
	}
	for _, p := range plan.Parts {
		if base == "" || !strings.HasPrefix(p.URL, base) {
			return nil, planRefused{errors.New("the upload plan names a place that is not the farm's object store")}
		}
	}
	return plan, nil
}

// uploadPlanPatience is how long the node asks for an upload plan, uploadPlanAsk how long it
// waits for one answer.
const (
	uploadPlanPatience = time.Minute
	uploadPlanAsk      = 10 * time.Second
)

// report sends a message to the coordinator without waiting for an answer.
func (a *Agent) report(msg any) {
	a.mu.Lock()
	coordinator, system := a.coordinator, a.system
	a.book.stamp(msg)
	a.mu.Unlock()
	if coordinator != nil {
		system.Root.Send(coordinator, protocol.Wrap(msg))
	}
}

// Render failure causes the node detects itself, and the coordinator's withdrawal.
var (
	errSilent    = errors.New("render went silent")
	errTooLong   = errors.New("render ran too long")
	errAbandoned = errors.New("the coordinator abandoned the attempt")
)

// faultOf says whose a failed attempt is, from its error and why its context ended: a render gone
// silent and a full disk are the node's, marked errors are whom they name, the rest the job's.
func faultOf(err, cause error) protocol.Fault {
	switch {
	case errors.Is(err, renderer.ErrNodeFault), errors.Is(err, syscall.ENOSPC), errors.Is(cause, errSilent):
		return protocol.FaultNode
	case errors.Is(err, renderer.ErrFarmFault):
		return protocol.FaultFarm
	}
	return protocol.FaultJob
}

// run performs one attempt and returns its final report (nil when it was interrupted).
func (a *Agent) run(ctx context.Context, cancel context.CancelCauseFunc, m *protocol.Assign, r renderer.Renderer) any {
	started := a.clock.Now()
	log := newLogCapture(a.cfg.MaxLogLines, a.clock.Now)
	// What the node reports never carries the secret values its task holds.
	revealed := secrets.NewRevealed(m.Task.Redact)
	work, err := os.MkdirTemp(workRoot(a.cfg), safeName(m.JobID)+"-")
	if err != nil {
		return &protocol.Failed{JobID: m.JobID, Attempt: m.Attempt, Error: "cannot make a working directory: " + err.Error(),
			Retryable: true, Fault: protocol.FaultNode}
	}
	defer os.RemoveAll(work)

	task, err := a.files.stage(ctx, m, work, log)
	if err == nil {
		err = a.render(ctx, cancel, m, r, task, log, revealed)
	}
	var report *protocol.OutputReport
	if err == nil {
		log.Printf("uploading the output (%s)", m.Task.Output.Name)
		if m.Task.Output.PartSize > 0 {
			report, err = a.files.uploadToBucket(ctx, m, task.OutputPath, a.askUploadPlan, log)
		} else {
			err = a.files.upload(ctx, m.Task.Output, task.OutputPath)
		}
	}
	if ctx.Err() != nil && (a.ctx.Err() != nil || errors.Is(context.Cause(ctx), errAbandoned)) {
		return nil
	}
	if err != nil {
		fault := faultOf(err, context.Cause(ctx))
		retryable := fault != protocol.FaultJob || errors.Is(err, renderer.ErrRetryable)
		message := err.Error()
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errSilent):
			message = fmt.Sprintf("the render reported no progress for %s", m.Task.SilenceTimeout)
		case errors.Is(cause, errTooLong):
			message = fmt.Sprintf("the render ran longer than the %s allowed", m.Task.MaxDuration)
		}
		lines, at := log.Lines()
		return &protocol.Failed{JobID: m.JobID, Attempt: m.Attempt, Error: revealed.Scrub(message), Retryable: retryable,
			Fault: fault, Log: revealed.ScrubAll(lines), LogAt: at}
	}
	lines, at := log.Lines()
	var size int64
	if info, err := os.Stat(task.OutputPath); err == nil {
		size = info.Size()
	}
	return &protocol.Done{JobID: m.JobID, Attempt: m.Attempt, Duration: a.clock.Now().Sub(started), Output: report, Size: size,
		Log: revealed.ScrubAll(lines), LogAt: at}
}

// render runs the engine under two watchdogs: silence (no progress for SilenceTimeout) and
// total duration (MaxDuration). Progress reaches the coordinator at most every ProgressInterval.
func (a *Agent) render(ctx context.Context, cancel context.CancelCauseFunc, m *protocol.Assign, r renderer.Renderer,
	task *renderer.Task, log *logCapture, revealed *secrets.Revealed) error {
	var mu sync.Mutex
	var silence clock.Timer
	armSilence := func() {
		mu.Lock()
		defer mu.Unlock()
		if silence != nil {
			silence.Stop()
		}
		if m.Task.SilenceTimeout > 0 {
			silence = a.clock.AfterFunc(m.Task.SilenceTimeout, func() { cancel(errSilent) })
		}
	}
	armSilence()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if silence != nil {
			silence.Stop()
		}
	}()
	if m.Task.MaxDuration > 0 {
		deadline := a.clock.AfterFunc(m.Task.MaxDuration, func() { cancel(errTooLong) })
		defer deadline.Stop()
	}
	var lastSent time.Time
	k := attemptKey{m.JobID, m.Attempt}
	progress := func(percent float64) {
		armSilence()
		now := a.clock.Now()
		a.mu.Lock()
		if run := a.running[k]; run != nil {
			run.percent = percent
		}
		a.mu.Unlock()
		mu.Lock()
		due := now.Sub(lastSent) >= a.cfg.ProgressInterval || percent >= 100
		if due {
			lastSent = now
		}
		mu.Unlock()
		if due {
			lines, at := log.Finished()
			a.report(&protocol.Progress{JobID: m.JobID, Attempt: m.Attempt, Percent: percent, Log: revealed.ScrubAll(lines), LogAt: at})
		}
	}
	log.Printf("rendering with the %s engine", r.Engine())
	err := r.Render(ctx, task, progress)
	if err == nil {
		if _, statErr := os.Stat(task.OutputPath); statErr != nil {
			err = fmt.Errorf("the %s engine finished without writing its output", r.Engine())
		}
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	return err
}

// selfTest runs the self-test of each engine asked (those of the jobs that failed here) in a
// folder of its own, and reports whether all passed: what decides whether the node is at fault.
func (a *Agent) selfTest(m *protocol.SelfTest) {
	result := &protocol.SelfTested{Passed: true}
	dir, err := os.MkdirTemp(workRoot(a.cfg), "self-test-")
	if err != nil {
		result.Passed, result.Error = false, "cannot make a working directory: "+err.Error()
	}
	for _, engine := range m.Engines {
		if !result.Passed {
			break
		}
		tester, ok := a.renderers[engine].(renderer.SelfTester)
		if !ok {
			continue // an engine with no test of its own: the working directory was the test
		}
		ctx, cancel := context.WithTimeout(a.ctx, selfTestTimeout)
		if err := tester.SelfTest(ctx, dir); err != nil {
			result.Passed, result.Error = false, err.Error()
		}
		cancel()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	a.log.Info("ran the self-test the coordinator asked for", "engines", m.Engines, "passed", result.Passed, "error", result.Error)
	a.report(result)
}

// selfTestTimeout bounds one engine's self-test.
const selfTestTimeout = 2 * time.Minute
