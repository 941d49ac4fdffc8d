package lottie

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/ffmpeg/ffmpegtest"
)

// broadcastRates are the rates studios deliver at, as exporters write them (Lottie's are single
// precision) and as the output must declare them.
var broadcastRates = []struct {
	fr       float64
	declared string
}{
	{23.9759998321533, "24000/1001"}, {24, "24/1"}, {25, "25/1"}, {29.9700012207031, "30000/1001"},
	{30, "30/1"}, {50, "50/1"}, {59.9399986267090, "60000/1001"}, {60, "60/1"},
}

// rateTemplate writes a 64x64 Lottie template of frames frames at fr, a square crossing it, with
// a layer "Bar" sound can be placed on.
func rateTemplate(t *testing.T, fr float64, frames int) string {
	dir := t.TempDir()
	doc := map[string]any{"v": "5.7.4", "nm": "rates", "fr": fr, "ip": 0, "op": frames, "w": 64, "h": 64, "assets": []any{},
		"layers": []any{
			map[string]any{"ty": 4, "nm": "Square", "ind": 1, "ip": 0, "op": frames, "st": 0,
				"ks": map[string]any{"p": map[string]any{"a": 1, "k": []any{
					map[string]any{"t": 0, "s": []float64{0, 32, 0}}, map[string]any{"t": frames - 1, "s": []float64{64, 32, 0}}}}},
				"shapes": []any{
					map[string]any{"ty": "rc", "s": map[string]any{"a": 0, "k": []int{16, 16}}, "p": map[string]any{"a": 0, "k": []int{0, 0}}, "r": map[string]any{"a": 0, "k": 0}},
					map[string]any{"ty": "fl", "c": map[string]any{"a": 0, "k": []float64{1, 0.5, 0, 1}}, "o": map[string]any{"a": 0, "k": 100}},
				}},
			map[string]any{"ty": 1, "nm": "Bar", "ind": 2, "ip": 0, "op": frames, "st": 0, "sw": 64, "sh": 64, "sc": "#102040", "ks": map[string]any{}},
		}}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return zipDir(t, dir)
}

// TestEveryFrameAtEveryRate renders at each broadcast rate, whole and split in three chunks, to
// H.264, ProRes and a PNG sequence, and reads the outputs back with ffprobe -count_frames:
// every frame the job asks for is there, the rate declared is the exact one (24000/1001, not
// the decimal's nearest fraction), whole and split alike, and the sound lasts as long as the
// picture.
func TestEveryFrameAtEveryRate(t *testing.T) {
	r, tools := newTestRenderer(t)
	tone := filepath.Join(t.TempDir(), "tone.wav")
	if out, err := exec.Command(tools.FFmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=5", tone).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	const frames = 61 // an odd count: a frame lost at a seam or at the end shows
	outputs := []struct {
		name     string
		settings renderer.Settings
	}{
		{"h264", renderer.Settings{Type: renderer.OutputVideo, Codec: "video_h264_vbr_5mbps"}},
		{"prores", renderer.Settings{Type: renderer.OutputVideo, Codec: "video_prores_422"}},
		{"png sequence", renderer.Settings{Type: renderer.OutputImage, Codec: renderer.CodecPNG, Frames: &renderer.Frames{Start: 0, End: frames - 1, Range: true}}},
	}
	for _, rate := range broadcastRates {
		template := rateTemplate(t, rate.fr, frames)
		for _, out := range outputs {
			t.Run(fmt.Sprintf("%s %s", rate.declared, out.name), func(t *testing.T) {
				sound := []renderer.Asset{{Type: renderer.AssetAudio, LayerName: "Bar", LocalPath: tone}}
				if out.settings.Type == renderer.OutputImage {
					sound = nil
				}
				whole := rateTask(t, template, out.settings, sound)
				if err := r.Render(context.Background(), whole, func(float64) {}); err != nil {
					t.Fatalf("%v\n%s", err, whole.Log)
				}
				// Chunks of 20 frames, the last taking what is left, as the farm plans them.
				split := rateTask(t, template, out.settings, sound)
				for start := 0; start+19 < frames; start += 20 {
					end := start + 19
					if end+20 >= frames {
						end = frames - 1
					}
					s := out.settings
					s.Frames = &renderer.Frames{Start: start, End: end, Range: true}
					chunk := rateTask(t, template, s, sound)
					chunk.Chunk = true
					chunk.OutputPath = filepath.Join(chunk.WorkDir, "chunk"+renderer.ChunkExtension(s))
					if err := r.Render(context.Background(), chunk, func(float64) {}); err != nil {
						t.Fatalf("%v\n%s", err, chunk.Log)
					}
					split.Chunks = append(split.Chunks, chunk.OutputPath)
					split.ChunkFrames = append(split.ChunkFrames, s.Frames.End-s.Frames.Start+1)
				}
				if err := r.Render(context.Background(), split, func(float64) {}); err != nil {
					t.Fatalf("%v\n%s", err, split.Log)
				}
				for name, file := range map[string]string{"whole": whole.OutputPath, "split": split.OutputPath} {
					if out.settings.Type == renderer.OutputImage {
						if n := zipEntries(t, file); n != frames {
							t.Errorf("%s: %d frames, want %d", name, n, frames)
						}
						continue
					}
					ffmpegtest.CheckRate(t, tools, name, file, frames, ffmpegtest.Rate(rate.declared), sound != nil)
				}
			})
		}
	}
}

// TestAFramesRangeKeepsItsFrames: a range of a 29.97 composition renders exactly its frames.
func TestAFramesRangeKeepsItsFrames(t *testing.T) {
	r, tools := newTestRenderer(t)
	task := rateTask(t, rateTemplate(t, 29.9700012207031, 61), renderer.Settings{Type: renderer.OutputVideo,
		Codec: "video_h264_vbr_5mbps", Frames: &renderer.Frames{Start: 7, End: 52, Range: true}}, nil)
	if err := r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	ffmpegtest.CheckRate(t, tools, "frames 7 to 52", task.OutputPath, 46, renderer.Rate{Num: 30000, Den: 1001}, false)
}

func rateTask(t *testing.T, template string, s renderer.Settings, assets []renderer.Asset) *renderer.Task {
	task := newTask(t, template, s, assets...)
	task.Composition = ""
	return task
}

func zipEntries(t *testing.T, file string) int {
	t.Helper()
	z, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	return len(z.File)
}
