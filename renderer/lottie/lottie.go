// Package lottie is framefarm's built-in Linux engine: Lottie (Bodymovin) animations rendered by
// Skia's Skottie in long-lived Node workers (the @napi-rs/canvas package), encoded by ffmpeg.
// Everything but drawing frames happens in Go: extracting the template, injecting assets into
// the animation JSON, fonts, encoding, audio.
package lottie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
	"github.com/framefarm/framefarm/renderer/inspect"
)

// Config locates what the engine runs.
type Config struct {
	// Node is the node program ("" finds it on PATH).
	Node string
	// WorkerDir holds worker.js and its node_modules (installed with npm ci).
	WorkerDir string
	Tools     ffmpeg.Tools
	Logger    *slog.Logger
}

// Renderer renders Lottie templates.
type Renderer struct {
	tools ffmpeg.Tools
	pool  *pool
}

var _ renderer.Renderer = (*Renderer)(nil)

// New checks that Node and the worker's modules are there and returns the engine.
func New(cfg Config) (*Renderer, error) {
	if err := fifoSupport(); err != nil {
		return nil, err
	}
	node, err := exec.LookPath(orDefault(cfg.Node, "node"))
	if err != nil {
		return nil, fmt.Errorf("node not found (install nodejs, or set engines.node): %w", err)
	}
	dir, err := filepath.Abs(cfg.WorkerDir)
	if err != nil {
		return nil, err
	}
	for _, need := range []string{"worker.js", filepath.Join("node_modules", "@napi-rs", "canvas", "package.json")} {
		if _, err := os.Stat(filepath.Join(dir, need)); err != nil {
			return nil, fmt.Errorf("the lottie worker is not installed in %s (run make setup, which runs npm ci there): %w", dir, err)
		}
	}
	return &Renderer{tools: cfg.Tools, pool: &pool{node: node, dir: dir, log: cfg.Logger}}, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (r *Renderer) Engine() string { return renderer.EngineLottie }

// Close stops the idle workers.
func (r *Renderer) Close() { r.pool.close() }

// Render extracts the template, applies the assets, renders the frames the settings ask for and
// encodes them into task.OutputPath.
func (r *Renderer) Render(ctx context.Context, task *renderer.Task, report func(float64)) error {
	doc, err := r.prepare(ctx, task)
	if err != nil {
		return err
	}
	width, height := intOf(doc.root["w"]), intOf(doc.root["h"])
	// Precomps are not capped by inspection; the selected one may be huge.
	if width < 1 || height < 1 || width > inspect.MaxLottieSide || height > inspect.MaxLottieSide {
		return fmt.Errorf("the composition is %dx%d; the lottie engine renders 1 to %d pixels a side", width, height, inspect.MaxLottieSide)
	}
	draft := task.Preview || task.Settings.Quality == "draft"
	if draft {
		width, height = max(2, width/2), max(2, height/2)
	}
	// Exporters write the out point in single precision (150.000006): the count is whole.
	ip, _ := number(doc.root["ip"])
	op, _ := number(doc.root["op"])
	frames := int(math.Round(op - ip))
	from, to := 0, frames-1
	if f := task.Settings.Frames; f != nil {
		from, to = f.Start, f.End
	}
	if to >= frames || from > to {
		return fmt.Errorf("frames %d to %d are outside the animation's %d frames", from, to, frames)
	}
	settings := task.Settings
	switch {
	case len(task.Chunks) > 0:
		return r.joinChunks(ctx, task, doc, width, height, draft, from, to, report)
	case task.Chunk && renderer.JoinEncodes(settings):
		settings.Codec = renderer.CodecLossless
		fallthrough
	case task.Chunk, settings.Type == renderer.OutputImage:
		doc.audio = nil // a chunk is part of the picture, whose join lays the sound once; stills have none
	}
	file := filepath.Join(doc.dir, ".framefarm-render.json")
	data, err := json.Marshal(doc.root)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return err
	}
	fifo := filepath.Join(task.WorkDir, "frames.fifo")
	if err := makeFIFO(fifo); err != nil {
		return fmt.Errorf("%w: cannot make the frame pipe: %w", renderer.ErrNodeFault, err)
	}
	video := videoPath(task, doc)
	fmt.Fprintf(task.Log, "rendering frames %d to %d at %dx%d, %s fps\n", from, to, width, height, doc.rate)
	encoder, err := ffmpeg.Start(ctx, r.tools, ffmpeg.Input{Path: fifo, Width: width, Height: height, Rate: doc.rate}, settings, draft, video, task.Log)
	if err != nil {
		return err
	}
	// If ffmpeg stops early, the worker must not wait on the pipe for nobody.
	renderCtx, stopRender := context.WithCancel(ctx)
	defer stopRender()
	encoded := make(chan error, 1)
	go func() {
		err := encoder.Wait()
		if err != nil {
			stopRender()
		}
		encoded <- err
	}()
	renderErr := r.renderFrames(renderCtx, renderRequest{File: file, Out: fifo, Width: width, Height: height, From: from, To: to}, report)
	if renderErr != nil && renderCtx.Err() == nil {
		// The worker failed on its own: its error is the story, ffmpeg's end is a consequence.
		encoder.Kill()
		<-encoded
		return renderErr
	}
	encodeErr := <-encoded
	switch {
	case encodeErr != nil && ctx.Err() == nil:
		return encodeErr
	case renderErr != nil:
		return renderErr
	}
	return r.addSound(ctx, task, doc, video, from, to)
}

// videoPath is where the picture is encoded: the output itself, or a file the sound is added to.
func videoPath(task *renderer.Task, doc *document) string {
	if len(doc.audio) == 0 {
		return task.OutputPath
	}
	return filepath.Join(task.WorkDir, "video"+filepath.Ext(task.OutputPath))
}

// addSound mixes the animation's sound, from frame from on, into video as the output.
func (r *Renderer) addSound(ctx context.Context, task *renderer.Task, doc *document, video string, from, to int) error {
	if len(doc.audio) == 0 {
		return nil
	}
	for i := range doc.audio {
		doc.audio[i].Start -= doc.rate.Seconds(from)
	}
	return ffmpeg.MuxAudio(ctx, r.tools, video, doc.audio, doc.rate, to-from+1, task.OutputPath, task.Log)
}

// joinChunks makes the job's output of its chunks: their frames one after the other, copied as
// they are (zipped on, numbered on, for an image sequence) or encoded once (renderer.JoinEncodes),
// and the sound laid over the whole.
func (r *Renderer) joinChunks(ctx context.Context, task *renderer.Task, doc *document, width, height int, draft bool, from, to int,
	report func(float64)) error {
	fmt.Fprintf(task.Log, "joining %d chunks: frames %d to %d, %s fps\n", len(task.Chunks), from, to, doc.rate)
	held := 0
	for _, n := range task.ChunkFrames {
		held += n
	}
	if len(task.ChunkFrames) != len(task.Chunks) || held != to-from+1 {
		return fmt.Errorf("the %d chunks hold %v frames, not the %d of frames %d to %d", len(task.Chunks), task.ChunkFrames, to-from+1, from, to)
	}
	video, list := videoPath(task, doc), filepath.Join(task.WorkDir, "chunks.txt")
	var err error
	switch {
	case task.Settings.Type == renderer.OutputImage:
		err = ffmpeg.JoinFrameZips(task.Chunks, task.OutputPath)
	case renderer.JoinEncodes(task.Settings):
		err = ffmpeg.EncodeChunks(ctx, r.tools, task.Chunks, list, width, height, doc.rate, to-from+1, task.Settings, draft, video, task.Log, report)
	default:
		err = ffmpeg.JoinSegments(ctx, r.tools, task.Chunks, task.ChunkFrames, list, doc.rate, video, task.Log)
	}
	if err == nil && task.Settings.Type != renderer.OutputImage {
		err = r.addSound(ctx, task, doc, video, from, to)
	}
	if err == nil {
		report(100)
	}
	return err
}

func (r *Renderer) renderFrames(ctx context.Context, req renderRequest, report func(float64)) error {
	// The worker runs in its own folder: it needs absolute paths.
	var err error
	if req.File, err = filepath.Abs(req.File); err != nil {
		return err
	}
	if req.Out, err = filepath.Abs(req.Out); err != nil {
		return err
	}
	w, err := r.pool.get()
	if err != nil {
		return fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	defer r.pool.put(w)
	total := float64(req.To - req.From + 1)
	return w.render(ctx, req, func(frame int) { report(float64(frame-req.From+1) / total * 100) })
}

// prepare extracts the template next to the work and applies the job's assets to the animation.
func (r *Renderer) prepare(ctx context.Context, task *renderer.Task) (*document, error) {
	dir := filepath.Join(task.WorkDir, "template")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	anim, kind, err := inspect.ExtractProject(task.TemplatePath, dir, inspect.Limits{})
	if err != nil {
		return nil, err
	}
	if kind != inspect.ProjectLottie {
		return nil, errors.New("the template holds an After Effects project; the lottie engine renders Lottie exports")
	}
	raw, err := os.ReadFile(anim)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))))
	dec.UseNumber()
	doc := &document{dir: filepath.Dir(anim), tools: r.tools}
	if err := dec.Decode(&doc.root); err != nil {
		return nil, fmt.Errorf("the Lottie JSON cannot be read: %w", err)
	}
	if err := doc.selectComposition(task.Composition); err != nil {
		return nil, err
	}
	fps, ok := number(doc.root["fr"])
	if !ok || fps <= 0 {
		return nil, errors.New("the animation has no frame rate")
	}
	doc.rate = renderer.RateOf(fps)
	fonts := collectFonts(dir, task.Fonts)
	for i, asset := range task.Assets {
		if err := doc.apply(ctx, asset, fonts); err != nil {
			return nil, fmt.Errorf("assets[%d]: %w", i, err)
		}
	}
	if missing := embedFonts(doc.root, fonts); len(missing) > 0 {
		fmt.Fprintf(task.Log, "fonts without a file, left to the system's fonts: %v\n", missing)
	}
	if err := doc.checkFilePaths(); err != nil {
		return nil, err
	}
	return doc, nil
}

func intOf(v any) int {
	n, _ := number(v)
	return int(n)
}
