package main

// The plugins a coordinator started by the end-to-end tests runs with: a renderer the test
// drives over loopback, an inspector reading a manifest, and a watcher that tells the test of
// every durable transition. They exist in test files only.

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/inspect"
)

// envControl names the URL of the test's render control server.
const envControl = "FRAMEFARM_TEST_CONTROL"

// envRealEngines set to 1 gives the embedded node the production engines (Lottie, ffmpeg, and
// After Effects through the stand-in aerender) instead of the test-driven renderer.
const envRealEngines = "FRAMEFARM_TEST_REAL_ENGINES"

func testPlugins() plugins {
	control := os.Getenv(envControl)
	return plugins{
		engines: func(cfg EnginesConfig, log *slog.Logger) ([]renderer.Renderer, func()) {
			if os.Getenv(envRealEngines) == "1" {
				return startEngines(cfg, log)
			}
			return []renderer.Renderer{
				&testRenderer{engine: renderer.EngineLottie, control: control},
				&testRenderer{engine: renderer.EngineFFmpeg, control: control},
			}, func() {}
		},
		inspector: manifestInspector{},
		watch: func(ev *actors.Events) {
			(&signalPrinter{jobs: os.Getenv(envJobSignals) != "0"}).watch(ev)
		},
		store: func(s actors.Store) actors.Store {
			if os.Getenv(envHoldFinish) == "1" {
				return &finishHolder{Store: s}
			}
			return s
		},
	}
}

// envHoldFinish set to 1 stops, for good, the first write that would finish a job: the
// coordinator then holds a node's result it has not made durable, for a test to kill it there.
const envHoldFinish = "FRAMEFARM_TEST_HOLD_FINISH"

// finishHolder is a store whose first write finishing a job never commits. It says so with a
// signal ("commit held finished") and holds the write until the process is killed.
type finishHolder struct {
	actors.Store
	once sync.Once
}

// finishes reports whether a command finishes a job.
func finishes(c persistence.Command) bool {
	change, ok := c.(*persistence.ChangeJob)
	return ok && change.Prev != persistence.JobFinished && change.Job.State == persistence.JobFinished
}

func (h *finishHolder) hold(c persistence.Command) {
	if finishes(c) {
		h.once.Do(func() { fmt.Fprintln(os.Stdout, "ffsignal commit held finished") })
		select {}
	}
}

func (h *finishHolder) Apply(c persistence.Command) error {
	h.hold(c)
	return h.Store.Apply(c)
}

func (h *finishHolder) ApplyAsync(c persistence.Command, done func(error)) {
	h.hold(c)
	h.Store.ApplyAsync(c, done)
}

// envJobSignals set to 0 silences job signals: benchmarks create jobs by the thousand and wait
// on none of them.
const envJobSignals = "FRAMEFARM_TEST_JOB_SIGNALS"

// signalPrinter prints a line for every durable job and template transition, progress, fenced report,
// node change and webhook attempt; jobs false leaves jobs' transitions out.
type signalPrinter struct {
	jobs bool
	mu   sync.Mutex
}

func (s *signalPrinter) print(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "ffsignal "+format+"\n", args...)
}

func (s *signalPrinter) watch(ev *actors.Events) {
	if s.jobs {
		ev.JobStateChanged.Subscribe(func(e actors.JobStateChanged) { s.print("job %s %s", e.Job, e.To) })
	}
	ev.TemplateStatusChanged.Subscribe(func(e actors.TemplateStatusChanged) { s.print("template %s %s", e.Template, e.Status) })
	ev.TemplateReinspected.Subscribe(func(e actors.TemplateReinspected) { s.print("template %s reinspected", e.Template) })
	ev.JobProgressSaved.Subscribe(func(e actors.JobProgressSaved) { s.print("progress %s %g", e.Job, e.Percent) })
	// A fenced report: "ffsignal fenced JOB ATTEMPT:WHAT".
	ev.StaleReport.Subscribe(func(e actors.StaleReport) { s.print("fenced %s %d:%s", e.Job, e.Attempt, e.What) })
	ev.NodeStateChanged.Subscribe(func(e actors.NodeStateChanged) { s.print("node %s %s", e.Node, e.To) })
	// "ffsignal waits SUBJECT recorded": a change of why an engine's (or a team's) jobs wait is
	// durable.
	ev.WaitsRecorded.Subscribe(func(e actors.WaitsRecorded) {
		for _, c := range e.Changes {
			s.print("waits %s recorded", c.Subject)
		}
	})
	ev.WebhookAttempted.Subscribe(func(e actors.WebhookAttempted) { s.print("webhook %s %s", e.Job, e.Result) })
	// "ffsignal duties TERM leading|following": a replica took up or dropped the leader's duties.
	ev.DutiesChanged.Subscribe(func(e actors.DutiesChanged) {
		s.print("duties %d %s", e.Term, map[bool]string{true: "leading", false: "following"}[e.Leading])
	})
}

// manifestInspector reads test templates (zips holding manifest.json, an Inspection) and hands
// every other file to the real inspector.
type manifestInspector struct{}

func (manifestInspector) Inspect(ctx context.Context, templateType string, path string) (*renderer.Inspection, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return inspect.Inspector{}.Inspect(ctx, templateType, path)
	}
	defer zr.Close()
	f, err := zr.Open("manifest.json")
	if err != nil {
		return inspect.Inspector{}.Inspect(ctx, templateType, path)
	}
	defer f.Close()
	var in renderer.Inspection
	if err := json.NewDecoder(f).Decode(&in); err != nil {
		return nil, err
	}
	return &in, nil
}

// envNodeName names, in a render node process of the tests, the node its renders run on.
const envNodeName = "FRAMEFARM_TEST_NODE"

// renderCall is what the test renderer tells the control server at each step of a render.
type renderCall struct {
	Node        string            `json:"node"`
	JobID       string            `json:"jobId"`
	Attempt     int               `json:"attempt"`
	Engine      string            `json:"engine"`
	Step        int               `json:"step"`
	Composition string            `json:"composition"`
	Settings    renderer.Settings `json:"settings"`
	TemplateSHA string            `json:"templateSha"`
	Assets      []stagedAsset     `json:"assets"`
	Fonts       []stagedAsset     `json:"fonts"`
	// Chunk is set on a chunk's render; Chunks, on a join of chunks, are the calls that made
	// the chunks it was given, in order.
	Chunk  bool         `json:"chunk,omitempty"`
	Chunks []renderCall `json:"chunks,omitempty"`
	// SelfTest is set on the engine's self-test, which passes when answered "finish".
	SelfTest bool `json:"selfTest,omitempty"`
	// reply and gone are set in the test process only; gone is closed when the render stopped
	// asking before it was answered (its node abandoned it).
	reply chan renderReply
	gone  chan struct{}
}

type stagedAsset struct {
	Type      string `json:"type"`
	LayerName string `json:"layerName,omitempty"`
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	Size      int64  `json:"size,omitempty"`
}

// renderReply tells the test renderer its next step: report progress and ask again, or end.
type renderReply struct {
	Progress *float64 `json:"progress,omitempty"`
	// Log is written to the render's log before the progress is reported.
	Log string `json:"log,omitempty"`
	// Result is "" (ask again), "finish", "fail" or "retry" (a retryable failure).
	Result  string `json:"result,omitempty"`
	Message string `json:"message,omitempty"`
	// Size pads a finished render's output with spaces to this many bytes.
	Size int `json:"size,omitempty"`
}

// testRenderer asks the control server what to do; without one it finishes at once. Its output
// is the JSON of what it was given, so tests can check what reached the renderer.
type testRenderer struct {
	engine  string
	control string
}

func (r *testRenderer) Engine() string { return r.engine }

func (r *testRenderer) Render(ctx context.Context, task *renderer.Task, report func(float64)) error {
	call := renderCall{Node: os.Getenv(envNodeName), JobID: task.JobID, Attempt: task.Attempt, Engine: r.engine, Composition: task.Composition, Settings: task.Settings}
	if task.TemplatePath != "" {
		call.TemplateSHA, _ = fileDigest(task.TemplatePath)
	}
	for _, a := range task.Assets {
		s := stagedAsset{Type: a.Type, LayerName: a.LayerName, Value: string(a.Value)}
		if a.LocalPath != "" {
			s.SHA256, s.Size = fileDigest(a.LocalPath)
		}
		call.Assets = append(call.Assets, s)
	}
	for _, f := range task.Fonts {
		s := stagedAsset{Name: f.FileName}
		s.SHA256, s.Size = fileDigest(f.Path)
		call.Fonts = append(call.Fonts, s)
	}
	call.Chunk = task.Chunk
	for _, c := range task.Chunks {
		var made renderCall
		data, err := os.ReadFile(c)
		if err != nil || json.Unmarshal(data, &made) != nil {
			return fmt.Errorf("chunk %s is not a test render's output: %v", c, err)
		}
		call.Chunks = append(call.Chunks, made)
	}
	fmt.Fprintf(task.Log, "test renderer: %s attempt %d\n", task.JobID, task.Attempt)
	for step := 0; ; step++ {
		call.Step = step
		reply := renderReply{Result: "finish"}
		if r.control != "" {
			var err error
			if reply, err = r.ask(ctx, call); err != nil {
				return err
			}
		}
		if reply.Log != "" {
			fmt.Fprintln(task.Log, reply.Log)
		}
		if reply.Progress != nil {
			report(*reply.Progress)
		}
		switch reply.Result {
		case "":
			continue
		case "finish":
			out, _ := json.Marshal(call)
			if pad := reply.Size - len(out); pad > 0 {
				out = append(out, bytes.Repeat([]byte(" "), pad)...)
			}
			return os.WriteFile(task.OutputPath, out, 0o600)
		case "retry":
			return fmt.Errorf("%w: %s", renderer.ErrRetryable, reply.Message)
		default:
			return errors.New(reply.Message)
		}
	}
}

var _ renderer.SelfTester = (*testRenderer)(nil)

// SelfTest asks the control server whether the engine's self-test passes; without one it does.
func (r *testRenderer) SelfTest(ctx context.Context, dir string) error {
	if r.control == "" {
		return nil
	}
	reply, err := r.ask(ctx, renderCall{Node: os.Getenv(envNodeName), Engine: r.engine, SelfTest: true})
	if err != nil {
		return err
	}
	if reply.Result != "finish" {
		return errors.New(reply.Message)
	}
	return nil
}

func (r *testRenderer) ask(ctx context.Context, call renderCall) (renderReply, error) {
	body, _ := json.Marshal(call)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.control+"/render", bytes.NewReader(body))
	if err != nil {
		return renderReply{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return renderReply{}, err
	}
	defer resp.Body.Close()
	var reply renderReply
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return renderReply{}, fmt.Errorf("control server: %w", err)
	}
	return reply, nil
}

func fileDigest(path string) (string, int64) {
	f, err := os.Open(path)
	if err != nil {
		return "missing", 0
	}
	defer f.Close()
	h := sha256.New()
	n, _ := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n
}
