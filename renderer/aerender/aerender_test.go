package aerender

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/aerender/aerendertest"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
)

const fixtures = "../testdata/fixtures"

type rig struct {
	r      *Renderer
	tools  ffmpeg.Tools
	record string
	fonts  string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	tools, err := ffmpeg.Find("", "")
	if err != nil {
		t.Fatal(err, " (make setup installs ffmpeg)")
	}
	rg := &rig{tools: tools, record: t.TempDir(), fonts: t.TempDir()}
	t.Setenv("FRAMEFARM_STANDIN_RECORD", rg.record)
	t.Setenv("FRAMEFARM_STANDIN_FFMPEG", tools.FFmpeg)
	rg.r, err = New(Config{Engine: renderer.EngineAE2025, Aerender: aerendertest.BuildStandIn(t), FontsDir: rg.fonts, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	return rg
}

// staged copies a fixture where the node would have staged an asset.
func staged(t *testing.T, fixture string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, fixture))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(fixture))
	os.WriteFile(p, data, 0o600)
	return p
}

func (rg *rig) task(t *testing.T, template string, s renderer.Settings, assets ...renderer.Asset) *renderer.Task {
	work := t.TempDir()
	return &renderer.Task{JobID: "test", Attempt: 1, WorkDir: work, TemplatePath: filepath.Join(fixtures, template), Composition: "main",
		Assets: assets, Settings: s, OutputPath: filepath.Join(work, "out"+renderer.OutputExtension(s)), Log: &bytes.Buffer{}}
}

// lastRun reads what the stand-in recorded.
func (rg *rig) lastRun(t *testing.T) (flags map[string]string, script string) {
	t.Helper()
	entries, _ := os.ReadDir(rg.record)
	if len(entries) != 1 {
		t.Fatalf("%d stand-in runs recorded, want 1", len(entries))
	}
	data, _ := os.ReadFile(filepath.Join(rg.record, entries[0].Name()))
	os.Remove(filepath.Join(rg.record, entries[0].Name()))
	var rec struct {
		Flags  map[string]string
		Script string
	}
	json.Unmarshal(data, &rec)
	return rec.Flags, rec.Script
}

func TestRendersAVideoThroughAerender(t *testing.T) {
	rg := newRig(t)
	task := rg.task(t, "templates/nexrender_1layer.aep", renderer.Settings{Type: renderer.OutputVideo, Codec: "video_h264_cbr_5mbps"},
		renderer.Asset{Type: renderer.AssetText, LayerName: "Title", Value: json.RawMessage(`"Hello"`)},
		renderer.Asset{Type: renderer.AssetImage, LayerName: "Photo", LocalPath: staged(t, "lottie/synthetic/images/photo.jpg")},
		renderer.Asset{Type: renderer.AssetStatic, Name: "data.csv", LocalPath: staged(t, "lottie/LICENSES.txt")})
	var progress []float64
	if err := rg.r.Render(context.Background(), task, func(p float64) { progress = append(progress, p) }); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	m, err := ffmpeg.Probe(context.Background(), rg.tools, task.OutputPath)
	if err != nil || m.Codec != "h264" || m.Width != 640 || !m.HasAudio || m.Duration < 0.99 || m.Duration > 1.05 {
		t.Fatalf("output %+v, %v", m, err)
	}
	if last := progress[len(progress)-1]; last < 95 || last > 99 {
		t.Fatalf("progress ended at %v", last)
	}
	flags, script := rg.lastRun(t)
	if flags["comp"] != "main" || flags["RStemplate"] != DefaultRenderSettings || flags["OMtemplate"] != DefaultOutputModule ||
		filepath.Ext(flags["output"]) != DefaultExtension || flags["s"] != "" || filepath.Base(flags["project"]) != "template.aep" {
		t.Fatalf("aerender flags %v", flags)
	}
	photo := filepath.Join(task.WorkDir, "project", "framefarm-assets", "1-photo.jpg")
	for _, want := range []string{`framefarm.text({"rendered":"main","composition":""}, "Title", "Hello");`, `framefarm.footage({"rendered":"main","composition":""}, "Photo", ` + js(photo) + `);`} {
		if !strings.Contains(script, want) {
			t.Fatalf("the script lacks %s", want)
		}
	}
	if _, err := os.Stat(filepath.Join(task.WorkDir, "project", "data.csv")); err != nil {
		t.Fatalf("the static asset is not next to the project: %v", err)
	}
}

func TestStillsAndRangesUseFramesAndDraftSettings(t *testing.T) {
	rg := newRig(t)
	task := rg.task(t, "templates/nexrender_1layer.aep", renderer.Settings{Type: renderer.OutputImage, Codec: renderer.CodecJPEG, Quality: "draft", Frames: &renderer.Frames{Start: 12, End: 12}})
	if err := rg.r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	flags, _ := rg.lastRun(t)
	if flags["s"] != "12" || flags["e"] != "12" || flags["RStemplate"] != DefaultDraftSettings {
		t.Fatalf("aerender flags %v", flags)
	}
	if data, _ := os.ReadFile(task.OutputPath); len(data) < 3 || !bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}) {
		t.Fatal("the output is not a JPEG")
	}
	task = rg.task(t, "templates/nexrender_1layer.aep", renderer.Settings{Type: renderer.OutputImage, Codec: renderer.CodecPNG, Frames: &renderer.Frames{Start: 0, End: 4, Range: true}})
	if err := rg.r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	zr, err := zip.OpenReader(task.OutputPath)
	if err != nil || len(zr.File) != 5 {
		t.Fatalf("frame zip: %v", err)
	}
	zr.Close()
}

func TestAepOutputIsTheCollectedProject(t *testing.T) {
	rg := newRig(t)
	task := rg.task(t, "templates/nexrender_1layer.aep", renderer.Settings{Type: renderer.OutputAEP},
		renderer.Asset{Type: renderer.AssetAudio, LayerName: "Music", LocalPath: staged(t, "lottie/synthetic/images/photo.jpg")})
	if err := rg.r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	zr, err := zip.OpenReader(task.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	want := []string{"framefarm-assets/0-photo.jpg", "template-framefarm.aep", "template.aep"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("zip holds %v, want %v", names, want)
	}
}

func TestMogrtEssentialsRenderTheWrapperComposition(t *testing.T) {
	rg := newRig(t)
	task := rg.task(t, "templates/vonstring_ae.mogrt", renderer.Settings{Type: renderer.OutputVideo},
		renderer.Asset{Type: renderer.AssetEssential, Value: json.RawMessage(`{"Title": "Hi"}`)})
	if err := rg.r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	flags, script := rg.lastRun(t)
	if flags["comp"] != "framefarm essential main" || !strings.Contains(script, `framefarm.essential("main", "framefarm essential main", {"Title":"Hi"});`) {
		t.Fatalf("flags %v", flags)
	}
}

func TestBundledAndTeamFontsAreInstalled(t *testing.T) {
	rg := newRig(t)
	// A zip bundling an After Effects project with a font.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, src := range map[string]string{"project/t.aep": "templates/nexrender_1layer.aep", "project/fonts/Brand.ttf": "lottie/LICENSES.txt"} {
		data, _ := os.ReadFile(filepath.Join(fixtures, src))
		w, _ := zw.Create(name)
		w.Write(data)
	}
	zw.Close()
	template := filepath.Join(t.TempDir(), "t.zip")
	os.WriteFile(template, buf.Bytes(), 0o600)
	task := rg.task(t, "", renderer.Settings{Type: renderer.OutputVideo})
	task.TemplatePath = template
	task.Fonts = []renderer.FontFile{{FileName: "Team.otf", Path: staged(t, "lottie/LICENSES.txt")}}
	if err := rg.r.Render(context.Background(), task, func(float64) {}); err != nil {
		t.Fatalf("%v\n%s", err, task.Log)
	}
	for _, f := range []string{"Brand.ttf", "Team.otf"} {
		if !strings.Contains(task.Log.(fmt.Stringer).String(), "installed font "+f+" as framefarm-") {
			t.Errorf("font %s not installed:\n%s", f, task.Log)
		}
	}
	// Installed for the render only: nothing stays behind for another team's render.
	if left, _ := os.ReadDir(rg.fonts); len(left) != 0 {
		t.Errorf("fonts left installed after the render: %v", left)
	}
}

// TestFontsOfOneFamilyFromDifferentFilesTakeTurns: two renders whose fonts share a family but
// not a file never have both installed; the second waits for the first to end.
func TestFontsOfOneFamilyFromDifferentFilesTakeTurns(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, installedPrefix+"000000000000-Old.ttf"), []byte("left by a crash"), 0o600)
	book := fontBookFor(dir)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a crashed run's font stayed: %v", left)
	}
	dejavu := renderer.FontFile{FileName: "Brand.ttf", Path: "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"}
	if _, err := os.Stat(dejavu.Path); err != nil {
		t.Fatal("fonts-dejavu-core is not installed (make setup installs it)")
	}
	// Same family, another file: DejaVu Sans with a byte changed at its end.
	data, _ := os.ReadFile(dejavu.Path)
	data = append(data, 0)
	other := renderer.FontFile{FileName: "Brand.ttf", Path: filepath.Join(t.TempDir(), "Brand.ttf")}
	os.WriteFile(other.Path, data, 0o600)

	var log bytes.Buffer
	releaseA, err := book.install(context.Background(), []renderer.FontFile{dejavu}, &log)
	if err != nil {
		t.Fatal(err)
	}
	// The same file again is shared, not waited for.
	releaseShared, err := book.install(context.Background(), []renderer.FontFile{dejavu}, &log)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	book.mu.Lock()
	book.waiting = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	book.mu.Unlock()
	installedB := make(chan func())
	go func() {
		release, err := book.install(context.Background(), []renderer.FontFile{other}, io.Discard)
		if err != nil {
			t.Error(err)
		}
		installedB <- release
	}()
	<-waiting
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Fatalf("both files of the family are installed: %v", files)
	}
	releaseA()
	releaseShared()
	releaseB := <-installedB
	files, _ := os.ReadDir(dir)
	if len(files) != 1 || !strings.HasSuffix(files[0].Name(), "-Brand.ttf") {
		t.Fatalf("after the first render: %v", files)
	}
	releaseB()
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("after both renders: %v", files)
	}
	// A render waiting for a family gives up when its context ends.
	releaseA, _ = book.install(context.Background(), []renderer.FontFile{dejavu}, &log)
	defer releaseA()
	ctx, cancel := context.WithCancel(context.Background())
	book.mu.Lock()
	book.waiting = func() { cancel() }
	book.mu.Unlock()
	if _, err := book.install(ctx, []renderer.FontFile{other}, io.Discard); err == nil {
		t.Fatal("a cancelled render kept waiting for its font")
	}
}

func TestAerenderErrorsFailTheRender(t *testing.T) {
	rg := newRig(t)
	t.Setenv("FRAMEFARM_STANDIN_MODE", "fail")
	task := rg.task(t, "templates/nexrender_1layer.aep", renderer.Settings{Type: renderer.OutputVideo})
	err := rg.r.Render(context.Background(), task, func(float64) {})
	if err == nil || !strings.Contains(err.Error(), `the composition "main" has no layers`) {
		t.Fatalf("got %v", err)
	}
}

func TestCancelKillsASilentAerender(t *testing.T) {
	rg := newRig(t)
	t.Setenv("FRAMEFARM_STANDIN_MODE", "silent")
	task := rg.task(t, "templates/nexrender_1layer.aep", renderer.Settings{Type: renderer.OutputVideo})
	ctx, cancel := context.WithCancel(context.Background())
	lines := 0
	err := rg.r.Render(ctx, task, func(float64) {
		// The stand-in prints three lines, then hangs: the node's silence watchdog would fire.
		if lines++; lines == 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestProgressParser(t *testing.T) {
	var p progressParser
	for _, l := range []string{"PROGRESS:  Duration: 0:00:10;00", "PROGRESS:  Frame Rate: 29.97 (comp)", "PROGRESS:  0:00:04;29 (150): 0 Seconds"} {
		p.line(l)
	}
	if p.percent < 49.9 || p.percent > 50.1 {
		t.Fatalf("percent %v", p.percent)
	}
	p.line("aerender ERROR: No comp was found with the given name.")
	if len(p.errors) != 1 || p.errors[0] != "No comp was found with the given name." {
		t.Fatalf("errors %v", p.errors)
	}
}
