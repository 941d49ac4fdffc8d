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

// SplitsFrames reports whether an engine renders a range of frames into a chunk and joins chunks
// (Task.Chunk, Task.Chunks), so a long render can be spread over several nodes.
func SplitsFrames(engine string) bool { return engine == EngineLottie }

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

// AssetRules are what an engine can apply of a job's assets, asked when the job is created, so
// what it cannot apply is refused then rather than failing on a render node. An engine without
// rules takes every asset.
type AssetRules interface {
	// LayerType is the type of layer an asset of assetType must go into ("" for any).
	LayerType(assetType string) string
	// CheckAsset refuses what the engine cannot apply of an asset, naming the asset's field.
	CheckAsset(a Asset) *AssetRefusal
}

// AssetRefusal says which field of an asset an engine cannot take, and why.
type AssetRefusal struct {
	Field string
	Err   error
}

// SelfTester is a renderer that shows it works on this machine by rendering a small test of its
// own in dir (an empty folder it may fill). A render node runs it when the coordinator asks,
// before it quarantines the node for failures that may be its jobs' rather than its own.
type SelfTester interface {
	SelfTest(ctx context.Context, dir string) error
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
	// Chunk asks for one chunk of a job split over the farm: the frames of Settings.Frames, without
	// sound, encoded as the job asks as a segment its join concatenates, or lossless when the join
	// encodes (JoinEncodes, ChunkExtension).
	Chunk bool
	// Chunks, when set, are a split job's chunks on local disk, in frame order: the renderer
	// joins them into the job's output, their frames copied as they are (or encoded once, when
	// JoinEncodes) and the sound laid once over the whole length, instead of rendering frames.
	Chunks []string
	// ChunkFrames is how many frames each of Chunks holds.
	ChunkFrames []int
	// Log receives the engine's own output; it is kept as the job's render log.
	Log io.Writer
}

// FontFile is a team font staged for one render.
type FontFile struct {
	FileName string
	Path     string
}

// Whose a failed render is, marked on its error: the coordinator retries a job and blames a node
// by it. An error with no mark is the job's own (its input or its content), which would fail
// again on any node: it fails the job and says nothing of the node.
var (
	// ErrRetryable marks a failure that may pass (the user's bucket refused the output for now):
	// the job may run again. It is still the job's, not the node's.
	ErrRetryable = errors.New("retryable render failure")
	// ErrNodeFault marks a failure of the render node itself: its disk, an engine that cannot
	// start or died without saying why, an output that vanished. The job may run again elsewhere,
	// and the node's fail streak counts it.
	ErrNodeFault error = fault("render node failure")
	// ErrFarmFault marks the farm's own files out of reach (the coordinator's file URLs, its object
	// store): the job may run again, and no node is to blame.
	ErrFarmFault error = fault("farm storage unreachable")
)

// fault is a failure that is not the job's: it may pass, so it is retryable too.
type fault string

func (f fault) Error() string { return string(f) }

func (f fault) Is(target error) bool { return target == ErrRetryable }
