// Package renderer is the vocabulary of rendering shared by the coordinator and its render nodes:
// what a template contains (compositions, layers), what a job asks for (assets, settings), and the
// Renderer interface every engine (After Effects, the built-in Lottie engine, ffmpeg) implements.
package renderer

import (
	"context"
	"errors"
	"io"
)

// Engine names a render engine. A job runs only on a node that advertises its engine.
const (
	EngineAE2025 = "ae2025"
	EngineAE2026 = "ae2026"
	EngineLottie = "lottie"
	// EngineFFmpeg stitches join jobs; clients never name it in settings.engine.
	EngineFFmpeg = "ffmpeg"
)

// SelectableEngines are the values clients may put in settings.engine.
var SelectableEngines = []string{EngineAE2025, EngineAE2026, EngineLottie}

// Renderer turns one task into one output file. Implementations must honour ctx: when it is
// cancelled (job withdrawn, node shutting down, render silent too long) they stop promptly and
// return ctx.Err().
type Renderer interface {
	// Engine is the engine name this renderer serves, for example "lottie".
	Engine() string
	// Render produces task.OutputPath. report may be called any number of times with the
	// progress so far (0..100); the caller throttles what it forwards.
	Render(ctx context.Context, task *Task, report func(percent float64)) error
}

// Task is everything a renderer needs, already staged on the node's disk.
type Task struct {
	JobID   string
	Attempt int
	// WorkDir is an empty directory owned by this task; it is removed afterwards.
	WorkDir string
	// TemplatePath is the template file on local disk; empty for join jobs.
	TemplatePath string
	TemplateType string
	Composition  string
	Assets       []Asset
	Settings     Settings
	Preview      bool
	// Fonts are font files on local disk, named as the job named them.
	Fonts []FontFile
	// OutputPath is where the renderer writes its single output file.
	OutputPath string
	// Log receives the engine's own output; it is kept as the job's render log.
	Log io.Writer
}

// FontFile is a team font staged for one render.
type FontFile struct {
	FileName string
	Path     string
}

// ErrRetryable marks a failure that says nothing about the job itself (a node problem, an
// interrupted render); the coordinator may run the job again. Other errors fail the job.
var ErrRetryable = errors.New("retryable render failure")
