package lottie

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
	"github.com/framefarm/framefarm/renderer/framediff"
)

const fixtures = "../testdata/fixtures/lottie"

func newTestRenderer(t testing.TB) (*Renderer, ffmpeg.Tools) {
	t.Helper()
	tools, err := ffmpeg.Find("", "")
	if err != nil {
		t.Fatal(err, " (make setup installs ffmpeg)")
	}
	r, err := New(Config{WorkerDir: "worker", Tools: tools, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, tools
}

// zipDir makes a zip template of a fixture folder.
func zipDir(t testing.TB, dir string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			w, _ := zw.Create(filepath.ToSlash(rel))
			data, _ := os.ReadFile(p)
			w.Write(data)
		}
		return nil
	})
	zw.Close()
	p := filepath.Join(t.TempDir(), "template.zip")
	os.WriteFile(p, buf.Bytes(), 0o600)
	return p
}

func newTask(t testing.TB, template string, s renderer.Settings, assets ...renderer.Asset) *renderer.Task {
	work := t.TempDir()
	return &renderer.Task{JobID: "test", Attempt: 1, WorkDir: work, TemplatePath: template, TemplateType: renderer.TemplateZip,
		Composition: "kenburns", Assets: assets, Settings: s, OutputPath: filepath.Join(work, "out"+renderer.OutputExtension(s)),
		Log: &bytes.Buffer{}}
}

func TestRendersAVideo(t *testing.T) {
	r, tools := newTestRenderer(t)
	task := newTask(t, zipDir(t, filepath.Join(fixtures, "synthetic")), renderer.Settings{Type: renderer.OutputVideo, Codec: "video_h264_vbr_5mbps", Frames: &renderer.Frames{Start: 0, End: 29, Range: true}})
	var last float64
	if err := r.Render(context.Background(), task, func(p float64) { last = p }); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	m, err := ffmpeg.Probe(context.Background(), tools, task.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	if m.Width != 1920 || m.Height != 1080 || m.Rate.String() != "30" || m.Codec != "h264" || m.Duration < 0.99 || m.Duration > 1.01 || last != 100 {
		t.Fatalf("output %+v, last progress %v", m, last)
	}
}

// renderStill renders one frame of a template to a PNG and decodes it.
func renderStill(t *testing.T, r *Renderer, template, comp string, frame int, assets ...renderer.Asset) image.Image {
	t.Helper()
	task := newTask(t, template, renderer.Settings{Type: renderer.OutputImage, Codec: renderer.CodecPNG, Frames: &renderer.Frames{Start: frame, End: frame}}, assets...)
	task.Composition = comp
	if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	img, err := framediff.Load(task.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// In kenburns.json the title sits in the bar at the bottom (y 780 to 960); the photo fills the
// rest.
var (
	titleArea = image.Rect(300, 800, 1620, 960)
	photoArea = image.Rect(0, 0, 1920, 700)
)

func TestAssetsChangeWhatIsDrawn(t *testing.T) {
	r, _ := newTestRenderer(t)
	template := zipDir(t, filepath.Join(fixtures, "synthetic"))
	base := renderStill(t, r, template, "kenburns", 60)
	if got := base.Bounds(); got.Dx() != 1920 || got.Dy() != 1080 {
		t.Fatalf("frame is %v", got)
	}
	replacement, _ := filepath.Abs(filepath.Join(fixtures, "synthetic", "images", "replacement.jpg"))
	cases := []struct {
		name      string
		asset     renderer.Asset
		changed   image.Rectangle
		unchanged image.Rectangle
	}{
		{"text", renderer.Asset{Type: renderer.AssetText, LayerName: "Title", Value: json.RawMessage(`"Zebra Quartz 42"`)}, titleArea, photoArea},
		{"opacity", renderer.Asset{Type: renderer.AssetData, LayerName: "Bar", Property: "Opacity", Value: json.RawMessage(`0`)}, image.Rect(0, 780, 250, 960), photoArea},
		{"image", renderer.Asset{Type: renderer.AssetImage, LayerName: "Photo", LocalPath: replacement}, photoArea, image.Rectangle{}},
		{"fill color", renderer.Asset{Type: renderer.AssetData, LayerName: "Title", Property: "Fill Color", Value: json.RawMessage(`"#ff0000"`)}, titleArea, photoArea},
		{"layer-remove", renderer.Asset{Type: renderer.AssetFunction, Name: "nx:layer-remove", Params: json.RawMessage(`{"layerName":"Title"}`)}, titleArea, photoArea},
		{"solid-color-set", renderer.Asset{Type: renderer.AssetFunction, Name: "nx:solid-color-set", Params: json.RawMessage(`{"layerName":"Bar","color":[255,255,0]}`)}, image.Rect(0, 780, 250, 960), photoArea},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := renderStill(t, r, template, "kenburns", 60, c.asset)
			if d := framediff.Mean(base, got, c.changed); d < 2 {
				t.Errorf("the area %v barely changed (mean difference %.2f)", c.changed, d)
			}
			if !c.unchanged.Empty() {
				if d := framediff.Mean(base, got, c.unchanged); d > 0.5 {
					t.Errorf("the area %v changed (mean difference %.2f)", c.unchanged, d)
				}
			}
		})
	}
}

func TestBundledFontIsUsed(t *testing.T) {
	r, _ := newTestRenderer(t)
	with := filepath.Join(fixtures, "EmbeddedFont.zip")
	// The same template without its fonts/ folder falls back to a system font.
	without := stripZip(t, with, "fonts/")
	asset := renderer.Asset{Type: renderer.AssetText, LayerName: "NAME", Value: json.RawMessage(`"Hamburgefonts"`)}
	a := renderStill(t, r, with, "", 0, asset)
	b := renderStill(t, r, without, "", 0, asset)
	if d := framediff.Mean(a, b, a.Bounds()); d < 0.5 {
		t.Fatalf("the bundled font made no difference (mean difference %.2f)", d)
	}
}

// stripZip copies a zip without the entries under prefix.
func stripZip(t *testing.T, src, prefix string) string {
	t.Helper()
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, prefix) {
			continue
		}
		rc, _ := f.Open()
		w, _ := zw.Create(f.Name)
		io.Copy(w, rc)
		rc.Close()
	}
	zw.Close()
	p := filepath.Join(t.TempDir(), "stripped.zip")
	os.WriteFile(p, buf.Bytes(), 0o600)
	return p
}

func TestImageOutputs(t *testing.T) {
	r, _ := newTestRenderer(t)
	template := zipDir(t, filepath.Join(fixtures, "synthetic"))
	t.Run("jpeg", func(t *testing.T) {
		task := newTask(t, template, renderer.Settings{Type: renderer.OutputImage, Codec: renderer.CodecJPEG, Frames: &renderer.Frames{Start: 10, End: 10}})
		if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
			t.Fatalf("%v\n%s", err, task.Log)
		}
		f, _ := os.Open(task.OutputPath)
		defer f.Close()
		cfg, err := jpeg.DecodeConfig(f)
		if err != nil || cfg.Width != 1920 || cfg.Height != 1080 {
			t.Fatalf("jpeg %+v, %v", cfg, err)
		}
	})
	t.Run("range", func(t *testing.T) {
		task := newTask(t, template, renderer.Settings{Type: renderer.OutputImage, Codec: renderer.CodecPNG, Quality: "draft", Frames: &renderer.Frames{Start: 3, End: 6, Range: true}})
		if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
			t.Fatalf("%v\n%s", err, task.Log)
		}
		zr, err := zip.OpenReader(task.OutputPath)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		if len(zr.File) != 4 {
			t.Fatalf("%d frames in the zip, want 4", len(zr.File))
		}
		rc, _ := zr.File[0].Open()
		defer rc.Close()
		cfg, err := png.DecodeConfig(rc)
		if err != nil || cfg.Width != 960 || cfg.Height != 540 {
			t.Fatalf("draft frame %+v, %v", cfg, err)
		}
	})
}

func TestProRes4444KeepsAlpha(t *testing.T) {
	r, tools := newTestRenderer(t)
	// CenteredText.json draws text on nothing: most of each frame is transparent.
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(fixtures, "CenteredText.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "CenteredText.json"), data, 0o600)
	task := newTask(t, zipDir(t, dir), renderer.Settings{Type: renderer.OutputVideo, Codec: "video_prores_4444", Frames: &renderer.Frames{Start: 0, End: 4, Range: true}})
	task.Composition = ""
	if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	out, err := exec.Command(tools.FFprobe, "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,pix_fmt", "-of", "csv=p=0", task.OutputPath).Output()
	if err != nil || strings.TrimSpace(string(out)) != "prores,yuva444p12le" && strings.TrimSpace(string(out)) != "prores,yuva444p10le" {
		t.Fatalf("stream %q, %v", out, err)
	}
}

func TestAudioIsMuxedAtTheLayer(t *testing.T) {
	r, tools := newTestRenderer(t)
	tone := filepath.Join(t.TempDir(), "tone.wav")
	if out, err := exec.Command(tools.FFmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=0.4", tone).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	task := newTask(t, zipDir(t, filepath.Join(fixtures, "synthetic")), renderer.Settings{Type: renderer.OutputVideo, Quality: "draft", Frames: &renderer.Frames{Start: 0, End: 29, Range: true}},
		renderer.Asset{Type: renderer.AssetAudio, LayerName: "Bar", LocalPath: tone})
	if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	m, err := ffmpeg.Probe(context.Background(), tools, task.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	// The audio is shorter than the video: the video keeps its length, padded with silence.
	if !m.HasAudio || m.Width != 960 || m.Duration < 0.99 || m.Duration > 1.05 {
		t.Fatalf("output %+v", m)
	}
}

func TestVideoIsPlacedFrameByFrame(t *testing.T) {
	r, tools := newTestRenderer(t)
	clip := filepath.Join(t.TempDir(), "clip.mp4")
	// A moving test pattern with a tone, 2 s at 25 fps: the engine resamples it to the
	// animation's 30 fps.
	if out, err := exec.Command(tools.FFmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=2",
		"-f", "lavfi", "-i", "sine=frequency=440:duration=2", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", clip).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	template := zipDir(t, filepath.Join(fixtures, "synthetic"))
	video := renderer.Asset{Type: renderer.AssetVideo, LayerName: "Photo", LocalPath: clip}
	base := renderStill(t, r, template, "kenburns", 10)
	early := renderStill(t, r, template, "kenburns", 10, video)
	late := renderStill(t, r, template, "kenburns", 40, video)
	if d := framediff.Mean(base, early, photoArea); d < 5 {
		t.Fatalf("the video did not replace the photo (mean difference %.2f)", d)
	}
	if d := framediff.Mean(early, late, photoArea); d < 1 {
		t.Fatalf("the video does not move between frames 10 and 40 (mean difference %.2f)", d)
	}
	// After the clip's 2 s the layer shows nothing: the photo is gone, the background is empty.
	after := renderStill(t, r, template, "kenburns", 75, video)
	if d := framediff.Mean(after, image.NewRGBA(after.Bounds()), image.Rect(0, 0, 1920, 600)); d > 1 {
		t.Fatalf("the layer still shows something after the video ended (mean difference %.2f)", d)
	}
	task := newTask(t, template, renderer.Settings{Type: renderer.OutputVideo, Quality: "draft", Frames: &renderer.Frames{Start: 0, End: 44, Range: true}}, video)
	if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	m, err := ffmpeg.Probe(context.Background(), tools, task.OutputPath)
	if err != nil || !m.HasAudio || m.Duration < 1.49 || m.Duration > 1.55 {
		t.Fatalf("output %+v, %v", m, err)
	}
}

func TestRefusals(t *testing.T) {
	r, _ := newTestRenderer(t)
	template := zipDir(t, filepath.Join(fixtures, "synthetic"))
	still := renderer.Settings{Type: renderer.OutputImage, Frames: &renderer.Frames{}}
	cases := []struct {
		asset renderer.Asset
		want  string
	}{
		{renderer.Asset{Type: renderer.AssetText, LayerName: "Nope", Value: json.RawMessage(`"x"`)}, `no layer named "Nope"`},
		{renderer.Asset{Type: renderer.AssetText, LayerName: "Bar", Value: json.RawMessage(`"x"`)}, "not a text layer"},
		{renderer.Asset{Type: renderer.AssetData, LayerName: "Bar", Property: "Effects.Blur", Value: json.RawMessage(`1`)}, `cannot set "Effects.Blur"`},
		{renderer.Asset{Type: renderer.AssetVideo, LayerName: "Title", LocalPath: "x.mp4"}, "a video replaces an image layer"},
		{renderer.Asset{Type: renderer.AssetVideo, LayerName: "Photo", LocalPath: "lottie_test.go"}, "not a readable media file"},
		{renderer.Asset{Type: renderer.AssetFunction, Name: "nx:nope", Params: json.RawMessage(`{}`)}, `no function "nx:nope"`},
	}
	for _, c := range cases {
		task := newTask(t, template, still, c.asset)
		err := r.Render(context.Background(), task, func(float64) {})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error with %q", c.asset, err, c.want)
		}
	}
}

func TestRelativeWorkingFolder(t *testing.T) {
	r, _ := newTestRenderer(t)
	template, err := filepath.Abs(zipDir(t, filepath.Join(fixtures, "synthetic")))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	os.Mkdir("work", 0o700)
	task := &renderer.Task{WorkDir: "work", TemplatePath: template, Composition: "kenburns", OutputPath: filepath.Join("work", "out.png"),
		Settings: renderer.Settings{Type: renderer.OutputImage, Frames: &renderer.Frames{}}, Log: &bytes.Buffer{}}
	if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
}

func TestHugeAnimationsAreRefused(t *testing.T) {
	r, _ := newTestRenderer(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "huge.json"), []byte(`{"v":"5.7.0","nm":"main","fr":30,"ip":0,"op":10,"w":100,"h":100,"layers":[],
		"assets":[{"id":"comp_0","nm":"huge","w":100000,"h":100000,"layers":[]}]}`), 0o600)
	task := newTask(t, zipDir(t, dir), renderer.Settings{Type: renderer.OutputVideo})
	task.Composition = "huge"
	if err := r.Render(context.Background(), task, func(float64) {}); err == nil || !strings.Contains(err.Error(), "1 to 8192 pixels a side") {
		t.Fatalf("got %v", err)
	}
}

func TestCancelStopsTheRenderAndTheNextOneWorks(t *testing.T) {
	r, _ := newTestRenderer(t)
	template := zipDir(t, filepath.Join(fixtures, "synthetic"))
	ctx, cancel := context.WithCancel(context.Background())
	task := newTask(t, template, renderer.Settings{Type: renderer.OutputVideo})
	err := r.Render(ctx, task, func(p float64) {
		if p > 0 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	renderStill(t, r, template, "kenburns", 0)
}

// TestAnimationReadingTheNodesFilesIsNotRendered: a template whose image climbs out of its
// folder (one inspected before paths were checked) is refused before the worker reads it.
func TestAnimationReadingTheNodesFilesIsNotRendered(t *testing.T) {
	r, _ := newTestRenderer(t)
	secret := filepath.Join(t.TempDir(), "secret.png")
	os.WriteFile(secret, []byte("the node's own file"), 0o600)
	dir := t.TempDir()
	doc := `{"nm":"kenburns","fr":25,"ip":0,"op":25,"w":100,"h":100,"assets":[{"id":"image_0","w":10,"h":10,"u":"","p":` + strconv.Quote(secret) + `}],
	 "layers":[{"ty":2,"nm":"Photo","refId":"image_0","ip":0,"op":25,"st":0,"ks":{}}]}`
	os.WriteFile(filepath.Join(dir, "data.json"), []byte(doc), 0o600)
	task := newTask(t, zipDir(t, dir), renderer.Settings{Type: renderer.OutputImage, Frames: &renderer.Frames{}})
	err := r.Render(context.Background(), task, func(float64) {})
	if err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Fatalf("got %v, want a refusal of the absolute image path", err)
	}
}

// A render split into chunks and joined makes the file one render makes: the same frames, the
// same length, and the sound laid once over the whole.
func TestChunksJoinIntoWhatOneRenderMakes(t *testing.T) {
	r, tools := newTestRenderer(t)
	template := zipDir(t, filepath.Join(fixtures, "synthetic"))
	tone := filepath.Join(t.TempDir(), "tone.wav")
	if out, err := exec.Command(tools.FFmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=3", tone).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sound := renderer.Asset{Type: renderer.AssetAudio, LayerName: "Bar", LocalPath: tone}
	for _, c := range []struct {
		name     string
		settings renderer.Settings
		// tolerance is how far a frame may be from one render's: each H.264 chunk is an encoding
		// of its own (and x264's threads make even two runs of one encoding differ a little);
		// ProRes codes each frame alone, so its frames are the same.
		tolerance float64
		// keys are the key frames of the joined H.264: one per chunk when chunks are copied, the
		// first alone when the join encodes once.
		keys string
	}{
		{"h264", renderer.Settings{Type: renderer.OutputVideo, Codec: "video_h264_vbr_5mbps", Quality: "draft", Frames: &renderer.Frames{Start: 5, End: 49, Range: true}}, 2, "0 15 30"},
		{"h264 cbr", renderer.Settings{Type: renderer.OutputVideo, Codec: "video_h264_cbr_5mbps", Quality: "draft", Frames: &renderer.Frames{Start: 5, End: 49, Range: true}}, 2, "0"},
		{"prores 4444", renderer.Settings{Type: renderer.OutputVideo, Codec: "video_prores_4444", Quality: "draft", Frames: &renderer.Frames{Start: 5, End: 49, Range: true}}, 0, ""},
		{"frames", renderer.Settings{Type: renderer.OutputImage, Codec: renderer.CodecPNG, Quality: "draft", Frames: &renderer.Frames{Start: 5, End: 12, Range: true}}, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			whole := newTask(t, template, c.settings, sound)
			if err := r.Render(context.Background(), whole, func(float64) {}); err != nil {
				t.Fatalf("%v\n%s", err, whole.Log)
			}
			var chunks []string
			var held []int
			f := c.settings.Frames
			size := (f.End - f.Start + 3) / 3
			for start := f.Start; start <= f.End; start += size {
				s := c.settings
				s.Frames = &renderer.Frames{Start: start, End: min(start+size-1, f.End), Range: true}
				chunk := newTask(t, template, s, sound)
				chunk.Chunk = true
				chunk.OutputPath = filepath.Join(chunk.WorkDir, "chunk"+renderer.ChunkExtension(s))
				if err := r.Render(context.Background(), chunk, func(float64) {}); err != nil {
					t.Fatalf("%v\n%s", err, chunk.Log)
				}
				chunks, held = append(chunks, chunk.OutputPath), append(held, s.Frames.End-s.Frames.Start+1)
			}
			joined := newTask(t, template, c.settings, sound)
			joined.Chunks, joined.ChunkFrames = chunks, held
			var last float64
			if err := r.Render(context.Background(), joined, func(p float64) { last = p }); err != nil {
				t.Fatalf("%v\n%s", err, joined.Log)
			}
			if last != 100 {
				t.Errorf("the join's last progress is %v", last)
			}
			if c.settings.Type == renderer.OutputImage {
				sameFrameZips(t, whole.OutputPath, joined.OutputPath, f.End-f.Start+1)
				return
			}
			sameVideos(t, tools, whole.OutputPath, joined.OutputPath, f.End-f.Start+1, c.tolerance)
			if c.keys != "" {
				if keys := keyFrames(t, tools, joined.OutputPath); keys != c.keys {
					t.Fatalf("key frames %s, want %s", keys, c.keys)
				}
			}
		})
	}
}

// keyFrames lists the key frames of a video by number.
func keyFrames(t *testing.T, tools ffmpeg.Tools, file string) string {
	t.Helper()
	out, err := exec.Command(tools.FFprobe, "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame", "-of", "csv=p=0", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, line := range strings.Fields(string(out)) {
		if strings.TrimSuffix(line, ",") == "1" {
			keys = append(keys, strconv.Itoa(i))
		}
	}
	return strings.Join(keys, " ")
}

func sameVideos(t *testing.T, tools ffmpeg.Tools, whole, joined string, frames int, tolerance float64) {
	t.Helper()
	a, b, worst, err := framediff.Videos(tools.FFmpeg, tools.FFprobe, whole, joined)
	if err != nil || a != frames || b != frames || worst > tolerance {
		t.Fatalf("one render has %d frames, the joined chunks %d (want %d); worst frame differs by %.3f; %v", a, b, frames, worst, err)
	}
	mw, err := ffmpeg.Probe(context.Background(), tools, whole)
	if err != nil {
		t.Fatal(err)
	}
	mj, err := ffmpeg.Probe(context.Background(), tools, joined)
	if err != nil {
		t.Fatal(err)
	}
	if !mj.HasAudio || mj.Duration != mw.Duration || mj.Rate != mw.Rate || mj.Codec != mw.Codec || mj.Alpha != mw.Alpha {
		t.Fatalf("one render %+v, joined chunks %+v", mw, mj)
	}
	for _, file := range []string{whole, joined} {
		out, err := exec.Command(tools.FFprobe, "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=duration", "-of", "csv=p=0", file).Output()
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); math.Abs(d-mw.Duration) > 0.05 {
			t.Fatalf("%s: the sound lasts %.3fs, the video %.3fs", filepath.Base(file), d, mw.Duration)
		}
	}
}

func sameFrameZips(t *testing.T, whole, joined string, frames int) {
	t.Helper()
	a, err := zip.OpenReader(whole)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := zip.OpenReader(joined)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(a.File) != frames || len(b.File) != frames {
		t.Fatalf("one render has %d frames, the joined chunks %d; want %d", len(a.File), len(b.File), frames)
	}
	for i := range a.File {
		if a.File[i].Name != b.File[i].Name || a.File[i].CRC32 != b.File[i].CRC32 {
			t.Fatalf("frame %d: %s (crc %x) in one render, %s (crc %x) joined", i, a.File[i].Name, a.File[i].CRC32, b.File[i].Name, b.File[i].CRC32)
		}
	}
}

// TestSelfTestRendersOnThisMachine: the engine's self-test renders its own animation.
func TestSelfTestRendersOnThisMachine(t *testing.T) {
	r, _ := newTestRenderer(t)
	if err := r.SelfTest(context.Background(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
