package main

// The plugins a coordinator started by the end-to-end tests runs with: a renderer the test
// drives over loopback, an inspector reading a manifest, and an observer that tells the test of
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

	"github.com/oklog/ulid/v2"

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
		observe: func(o actors.Observer) actors.Observer {
			return &signalObserver{Observer: o, jobs: os.Getenv(envJobSignals) != "0"}
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

// signalObserver prints a line for every durable job and template transition.
type signalObserver struct {
	actors.Observer
	jobs bool
	mu   sync.Mutex
}

func (s *signalObserver) JobStateChanged(id ulid.ULID, from, to persistence.JobState) {
	s.Observer.JobStateChanged(id, from, to)
	if !s.jobs {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "ffsignal job %s %s\n", id, to)
}

func (s *signalObserver) TemplateStatusChanged(team, id ulid.ULID, status persistence.TemplateStatus) {
	s.Observer.TemplateStatusChanged(team, id, status)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "ffsignal template %s %s\n", id, status)
}

func (s *signalObserver) TemplateReinspected(id ulid.ULID) {
	s.Observer.TemplateReinspected(id)
	fmt.Fprintf(os.Stdout, "ffsignal template %s reinspected\n", id)
}

func (s *signalObserver) JobProgressSaved(jobID ulid.ULID, percent float64) {
	s.Observer.JobProgressSaved(jobID, percent)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "ffsignal progress %s %g\n", jobID, percent)
}

// StaleReport signals a fenced report: "ffsignal fenced JOB ATTEMPT:WHAT".
func (s *signalObserver) StaleReport(jobID ulid.ULID, attempt int, what string) {
	s.Observer.StaleReport(jobID, attempt, what)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "ffsignal fenced %s %d:%s\n", jobID, attempt, what)
}

func (s *signalObserver) NodeStateChanged(nodeID string, from, to actors.NodeState) {
	s.Observer.NodeStateChanged(nodeID, from, to)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "ffsignal node %s %s\n", nodeID, to)
}

func (s *signalObserver) WebhookAttempt(jobID ulid.ULID, result string) {
	s.Observer.WebhookAttempt(jobID, result)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "ffsignal webhook %s %s\n", jobID, result)
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
	// reply is set in the test process only.
	reply chan renderReply
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
	// Result is "" (ask again), "finish", "fail" or "retry" (a retryable failure).
	Result  string `json:"result,omitempty"`
	Message string `json:"message,omitempty"`
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
		if reply.Progress != nil {
			report(*reply.Progress)
		}
		switch reply.Result {
		case "":
			continue
		case "finish":
			out, _ := json.Marshal(call)
			return os.WriteFile(task.OutputPath, out, 0o600)
		case "retry":
			return fmt.Errorf("%w: %s", renderer.ErrRetryable, reply.Message)
		default:
			return errors.New(reply.Message)
		}
	}
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
