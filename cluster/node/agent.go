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
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/actors/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/renderer"
)

// Config describes a node.
type Config struct {
	NodeID  string
	Slots   int
	Version string
	Labels  map[string]string
	// DataDir holds the node's working directories and template cache.
	DataDir string
	// ProgressInterval is the most often progress is reported [250ms].
	ProgressInterval time.Duration
	// MaxDownloadBytes caps any one file the node downloads [2 GiB].
	MaxDownloadBytes int64
	// DownloadTimeout bounds the download of any one file, body included [30m].
	DownloadTimeout time.Duration
	// MaxLogLines caps the render log lines sent with a report [2000].
	MaxLogLines int
}

// Agent runs renders for the coordinator.
type Agent struct {
	cfg       Config
	renderers map[string]renderer.Renderer
	files     *fileMover
	clock     clock.Clock
	log       *slog.Logger

	// ctx ends when the node shuts down; renders it interrupts are not reported (the
	// coordinator requeues them when it sees the node or itself restart).
	ctx      context.Context
	shutdown context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	running  map[string]bool
}

// New makes an agent for the given renderers. internal fetches from and uploads to the
// coordinator; external reaches the URLs users gave and refuses private addresses unless
// configured otherwise.
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
	// Engines hand paths to programs running elsewhere (the Lottie worker, After Effects).
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dataDir
	for _, dir := range []string{workRoot(cfg), cacheRoot(cfg)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	byEngine := make(map[string]renderer.Renderer, len(renderers))
	for _, r := range renderers {
		byEngine[r.Engine()] = r
	}
	ctx, shutdown := context.WithCancel(context.Background())
	return &Agent{
		cfg: cfg, renderers: byEngine, clock: clk, log: log.With("node", cfg.NodeID),
		files: &fileMover{Transfers: files, cacheDir: cacheRoot(cfg), maxBytes: cfg.MaxDownloadBytes, timeout: cfg.DownloadTimeout},
		ctx:   ctx, shutdown: shutdown, running: make(map[string]bool),
	}, nil
}

func workRoot(cfg Config) string  { return filepath.Join(cfg.DataDir, "work") }
func cacheRoot(cfg Config) string { return filepath.Join(cfg.DataDir, "cache", "templates") }

// Hello is how the node introduces itself.
func (a *Agent) Hello() protocol.Hello {
	engines := make([]string, 0, len(a.renderers))
	for e := range a.renderers {
		engines = append(engines, e)
	}
	sort.Strings(engines)
	return protocol.Hello{NodeID: a.cfg.NodeID, Engines: engines, Slots: a.cfg.Slots, Version: a.cfg.Version, Labels: a.cfg.Labels}
}

// Props makes the agent's actor.
func (a *Agent) Props() *actor.Props {
	return actor.PropsFromFunc(a.receive)
}

// Stop interrupts every render and waits for them to end.
func (a *Agent) Stop() {
	a.shutdown()
	a.wg.Wait()
}

func (a *Agent) receive(ctx actor.Context) {
	m, ok := ctx.Message().(*protocol.Assign)
	if !ok {
		return
	}
	coordinator := ctx.Sender()
	report := func(msg any) { ctx.ActorSystem().Root.Send(coordinator, msg) }
	r := a.renderers[m.Task.Engine]
	key := fmt.Sprintf("%s-%d", m.JobID, m.Attempt)
	a.mu.Lock()
	busy, full := a.running[key], len(a.running) >= a.cfg.Slots
	if r != nil && !busy && !full {
		a.running[key] = true
	}
	a.mu.Unlock()
	switch {
	case r == nil:
		report(&protocol.Failed{JobID: m.JobID, Attempt: m.Attempt, Error: fmt.Sprintf("this node has no %q engine", m.Task.Engine), Retryable: true})
		return
	case busy:
		return // the same attempt assigned twice: the first one reports
	case full:
		report(&protocol.Failed{JobID: m.JobID, Attempt: m.Attempt, Error: "the node has no free render slot", Retryable: true})
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.running, key)
			a.mu.Unlock()
		}()
		if msg := a.run(m, r, report); msg != nil && a.ctx.Err() == nil {
			report(msg)
		}
	}()
}

// Render failure causes the node detects itself.
var (
	errSilent  = errors.New("render went silent")
	errTooLong = errors.New("render ran too long")
)

// run performs one attempt and returns its final report (nil when the node is shutting down).
func (a *Agent) run(m *protocol.Assign, r renderer.Renderer, report func(any)) any {
	started := a.clock.Now()
	log := newLogCapture(a.cfg.MaxLogLines)
	ctx, cancel := context.WithCancelCause(a.ctx)
	defer cancel(nil)
	work, err := os.MkdirTemp(workRoot(a.cfg), m.JobID+"-")
	if err != nil {
		return &protocol.Failed{JobID: m.JobID, Attempt: m.Attempt, Error: "cannot make a working directory: " + err.Error(), Retryable: true}
	}
	defer os.RemoveAll(work)

	task, err := a.files.stage(ctx, m, work, log)
	if err == nil {
		err = a.render(ctx, cancel, m, r, task, log, report)
	}
	if err == nil {
		log.Printf("uploading the output (%s)", m.Task.Output.Name)
		err = a.files.upload(ctx, m.Task.Output, task.OutputPath)
	}
	if a.ctx.Err() != nil {
		return nil
	}
	if err != nil {
		retryable := errors.Is(err, renderer.ErrRetryable) || errors.Is(context.Cause(ctx), errSilent)
		message := err.Error()
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errSilent):
			message = fmt.Sprintf("the render reported no progress for %s", m.Task.SilenceTimeout)
		case errors.Is(cause, errTooLong):
			message = fmt.Sprintf("the render ran longer than the %s allowed", m.Task.MaxDuration)
		}
		return &protocol.Failed{JobID: m.JobID, Attempt: m.Attempt, Error: message, Retryable: retryable, Log: log.Lines()}
	}
	return &protocol.Done{JobID: m.JobID, Attempt: m.Attempt, Duration: a.clock.Now().Sub(started), Log: log.Lines()}
}

// render runs the engine under two watchdogs: silence (no progress for SilenceTimeout) and
// total duration (MaxDuration). Progress reaches the coordinator at most every ProgressInterval.
func (a *Agent) render(ctx context.Context, cancel context.CancelCauseFunc, m *protocol.Assign, r renderer.Renderer,
	task *renderer.Task, log *logCapture, report func(any)) error {
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
	progress := func(percent float64) {
		armSilence()
		now := a.clock.Now()
		mu.Lock()
		due := now.Sub(lastSent) >= a.cfg.ProgressInterval || percent >= 100
		if due {
			lastSent = now
		}
		mu.Unlock()
		if due {
			report(&protocol.Progress{JobID: m.JobID, Attempt: m.Attempt, Percent: percent})
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
