package ffmpeg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
)

func tools(t *testing.T) Tools {
	t.Helper()
	tl, err := Find("", "")
	if err != nil {
		t.Fatal(err, " (make setup installs ffmpeg)")
	}
	return tl
}

// clip makes a test video with ffmpeg's own sources.
func clip(t *testing.T, tl Tools, name string, width, height int, fps, seconds float64, audio bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	args := []string{"-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=%g:duration=%g", width, height, fps, seconds)}
	if audio {
		args = append(args, "-f", "lavfi", "-i", fmt.Sprintf("sine=frequency=440:duration=%g", seconds), "-c:a", "aac")
	}
	args = append(args, "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", p)
	if out, err := exec.Command(tl.FFmpeg, args...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return p
}

func join(t *testing.T, tl Tools, clips ...string) (Media, []float64) {
	t.Helper()
	task := &renderer.Task{WorkDir: t.TempDir(), Log: &bytes.Buffer{}}
	task.OutputPath = filepath.Join(task.WorkDir, "joined.mp4")
	for _, c := range clips {
		task.Assets = append(task.Assets, renderer.Asset{Type: renderer.AssetVideo, LocalPath: c})
	}
	var progress []float64
	if err := (&Joiner{Tools: tl}).Render(context.Background(), task, func(p float64) { progress = append(progress, p) }); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	m, err := Probe(context.Background(), tl, task.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	return m, progress
}

func TestJoinCopiesMatchingClips(t *testing.T) {
	tl := tools(t)
	a := clip(t, tl, "a.mp4", 320, 240, 30, 1, true)
	b := clip(t, tl, "b.mp4", 320, 240, 30, 2, true)
	m, progress := join(t, tl, a, b)
	if m.Width != 320 || m.Height != 240 || m.Rate.String() != "30" || !m.HasAudio || m.Duration < 2.95 || m.Duration > 3.1 {
		t.Fatalf("joined %+v", m)
	}
	if len(progress) == 0 || progress[len(progress)-1] != 100 {
		t.Fatalf("progress %v", progress)
	}
}

func TestJoinReencodesDifferentClipsAndFillsSilence(t *testing.T) {
	tl := tools(t)
	a := clip(t, tl, "a.mp4", 640, 360, 30, 1, true)
	b := clip(t, tl, "b.mp4", 321, 241, 25, 2, false)
	m, _ := join(t, tl, a, b)
	if m.Width != 640 || m.Height != 360 || m.Rate.String() != "30" || m.Codec != "h264" || !m.HasAudio || m.Duration < 2.95 || m.Duration > 3.1 {
		t.Fatalf("joined %+v", m)
	}
}

func TestJoinRefusesWhatIsNotAVideo(t *testing.T) {
	tl := tools(t)
	task := &renderer.Task{WorkDir: t.TempDir(), Log: &bytes.Buffer{}, Assets: []renderer.Asset{{Type: renderer.AssetVideo, LocalPath: "ffmpeg_test.go"}}}
	task.OutputPath = filepath.Join(task.WorkDir, "joined.mp4")
	if err := (&Joiner{Tools: tl}).Render(context.Background(), task, func(float64) {}); err == nil {
		t.Fatal("a Go file was joined as a video")
	}
}

func TestVideoCodecs(t *testing.T) {
	cases := map[string][]string{
		"video_h264_cbr_8mbps": {"libx264", "-minrate", "8M"},
		"video_h264_vbr_5mbps": {"libx264", "5M", "-maxrate", "7M"},
		"":                     {"libx264", "15M"},
		"video_prores_4444":    {"prores_ks", "yuva444p10le"},
		"video_prores_422":     {"prores_ks", "yuv422p10le"},
	}
	for codec, want := range cases {
		_, args := videoEncoding(codec, false, true)
		for _, w := range want {
			found := false
			for _, a := range args {
				found = found || a == w
			}
			if !found {
				t.Errorf("%q: %v lacks %q", codec, args, w)
			}
		}
	}
}

// TestPlaylistsCannotReadTheNodesFiles: a "video" or "audio" asset that is an HLS playlist
// naming a file elsewhere on the node is refused by its format; the file is never decoded.
func TestPlaylistsCannotReadTheNodesFiles(t *testing.T) {
	tl := tools(t)
	private := clip(t, tl, "private.ts", 64, 64, 10, 1, true)
	playlist := filepath.Join(t.TempDir(), "asset.mp4")
	os.WriteFile(playlist, []byte("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\nfile://"+private+"\n#EXT-X-ENDLIST\n"), 0o600)
	if _, err := Probe(context.Background(), tl, playlist); err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("a playlist was probed as a video: %v", err)
	}
	if err := CheckAudio(context.Background(), tl, playlist); err == nil {
		t.Fatal("a playlist was accepted as a sound")
	}
	// What the engines expect still passes.
	if _, err := Probe(context.Background(), tl, private); err != nil {
		t.Fatalf("an MPEG-TS clip: %v", err)
	}
	if err := CheckAudio(context.Background(), tl, private); err != nil {
		t.Fatalf("an MPEG-TS clip with sound: %v", err)
	}
}

// TestSelfTestEncodes: ffmpeg's self-test encodes on this machine, and says so when it cannot.
func TestSelfTestEncodes(t *testing.T) {
	tl := tools(t)
	if err := SelfTest(context.Background(), tl, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	broken := tl
	broken.FFmpeg = filepath.Join(t.TempDir(), "no-ffmpeg")
	if err := SelfTest(context.Background(), broken, t.TempDir()); err == nil || !strings.Contains(err.Error(), "self-test") {
		t.Fatalf("a self-test without ffmpeg: %v", err)
	}
}
