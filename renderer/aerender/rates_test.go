package aerender

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/ffmpeg/ffmpegtest"
)

// projectAtRate copies the one-composition fixture with its composition's rate set to
// dividend/divisor, as After Effects stores it in the composition's settings (cdta).
func projectAtRate(t *testing.T, dividend, divisor uint32) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, "templates", "nexrender_1layer.aep"))
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, []byte("cdta"))
	if at < 0 || bytes.Count(data, []byte("cdta")) != 1 {
		t.Fatal("the fixture should hold one composition's settings")
	}
	settings := data[at+8:]
	binary.BigEndian.PutUint32(settings[4:8], divisor)
	binary.BigEndian.PutUint32(settings[8:12], dividend)
	p := filepath.Join(t.TempDir(), "rate.aep")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAfterEffectsRendersEveryFrameAtItsRate: After Effects (the stand-in, which renders at the
// rate the project holds, written as a decimal) renders 61 frames of a composition at each
// broadcast rate; the outputs encoded by ffmpeg hold every frame and declare the exact rate.
func TestAfterEffectsRendersEveryFrameAtItsRate(t *testing.T) {
	rg := newRig(t)
	for _, c := range []struct {
		dividend, divisor uint32
		declared          renderer.Rate
	}{
		{23976, 1000, renderer.Rate{Num: 24000, Den: 1001}}, {24, 1, renderer.Rate{Num: 24, Den: 1}}, {25, 1, renderer.Rate{Num: 25, Den: 1}},
		{2997, 100, renderer.Rate{Num: 30000, Den: 1001}}, {30, 1, renderer.Rate{Num: 30, Den: 1}}, {50, 1, renderer.Rate{Num: 50, Den: 1}},
		{5994, 100, renderer.Rate{Num: 60000, Den: 1001}}, {60, 1, renderer.Rate{Num: 60, Den: 1}},
	} {
		project := projectAtRate(t, c.dividend, c.divisor)
		frames := &renderer.Frames{Start: 0, End: 60, Range: true}
		for _, s := range []renderer.Settings{
			{Type: renderer.OutputVideo, Codec: "video_h264_vbr_5mbps", Frames: frames},
			{Type: renderer.OutputVideo, Codec: "video_prores_422", Frames: frames},
			{Type: renderer.OutputImage, Codec: renderer.CodecPNG, Frames: frames},
		} {
			task := rg.task(t, "", s)
			task.TemplatePath, task.Composition = project, "testcomp1"
			if err := rg.r.Render(context.Background(), task, func(float64) {}); err != nil {
				t.Fatalf("%s at %s: %v\n%s", s.Codec, c.declared, err, task.Log)
			}
			rg.lastRun(t)
			name := s.Codec + " at " + c.declared.String()
			if s.Type == renderer.OutputImage {
				z, err := zip.OpenReader(task.OutputPath)
				if err != nil {
					t.Fatal(err)
				}
				if len(z.File) != 61 {
					t.Errorf("%s: %d frames, want 61", name, len(z.File))
				}
				z.Close()
				continue
			}
			ffmpegtest.CheckRate(t, rg.tools, name, task.OutputPath, 61, c.declared, true)
		}
	}
}
