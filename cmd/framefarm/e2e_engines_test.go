package main

// End-to-end tests with the production engines: real templates from the fixtures go through a
// real coordinator with its embedded node, the Lottie engine (Skottie workers and ffmpeg), the
// ffmpeg joiner, and the After Effects engine driving the stand-in aerender.

import (
	"archive/zip"
	"bytes"
	"image"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer/ffmpeg"
	"github.com/framefarm/framefarm/renderer/framediff"
)

const fixtureDir = "../../renderer/testdata/fixtures"

// fixtureZip zips a fixture folder as a template would be uploaded.
func fixtureZip(t testing.TB, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := filepath.WalkDir(filepath.Join(fixtureDir, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(fixtureDir, dir), p)
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		w.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// uploadTemplateFile uploads a real template file and waits for its inspection.
func (cl *client) uploadTemplateFile(typ string, data []byte) templateAnswer {
	cl.c.t.Helper()
	var tpl templateAnswer
	cl.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": typ, "displayName": "fixture"}, http.StatusCreated, &tpl)
	cl.put(tpl.UploadInfo.URL, data, http.StatusOK)
	if state := cl.c.waitFor("template", tpl.ID, "uploaded", "error"); state != "uploaded" {
		cl.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
		cl.c.t.Fatalf("template %s ended in %s: %v", tpl.ID, state, *tpl.Error)
	}
	cl.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
	return tpl
}

// render creates a job, waits for it to finish, and downloads its output.
func (cl *client) render(body map[string]any) (job, []byte) {
	cl.c.t.Helper()
	var cr created
	cl.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &cr)
	if state := cl.c.waitFor("job", cr.ID, "finished", "error"); state != "finished" {
		_, logs, _ := cl.call(http.MethodGet, "/api/v2/jobs/"+cr.ID+"/logs", nil)
		cl.c.t.Fatalf("job %s ended in %s: %v\n%s", cr.ID, state, *cl.job(cr.ID).Stats.Error, logs)
	}
	j := cl.job(cr.ID)
	status, data := get(cl.c.t, j.OutputURL)
	if status != http.StatusOK {
		cl.c.t.Fatalf("output of %s: status %d", cr.ID, status)
	}
	return j, data
}

func probe(t *testing.T, data []byte, ext string) ffmpeg.Media {
	t.Helper()
	tools, err := ffmpeg.Find("", "")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "media"+ext)
	os.WriteFile(p, data, 0o600)
	m, err := ffmpeg.Probe(t.Context(), tools, p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// frameOf extracts frame n of a video with ffmpeg.
func frameOf(t *testing.T, video []byte, n int) image.Image {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.mp4"), filepath.Join(dir, "frame.png")
	os.WriteFile(in, video, 0o600)
	if msg, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-i", in, "-vf", "select=eq(n\\,"+strconv.Itoa(n)+")",
		"-frames:v", "1", out).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, msg)
	}
	img, err := framediff.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// kenburnsJob renders the first two seconds of the synthetic Lottie fixture.
func kenburnsJob(templateID string, assets ...map[string]any) map[string]any {
	if assets == nil {
		assets = []map[string]any{}
	}
	return map[string]any{"template": map[string]any{"id": templateID, "composition": "kenburns"}, "assets": assets,
		"settings": map[string]any{"type": "video", "frames": []int{0, 59}, "codec": "h264_vbr_5mbps"}}
}

// TestLottieJobsRenderRealVideos: a Lottie zip template is inspected, and jobs injecting text, an
// image and an opacity render to MP4s ffprobe reads; the injected text shows where the title is.
func TestLottieJobsRenderRealVideos(t *testing.T) {
	c := startCoordinator(t, options{slots: 2, realEngines: true})
	acme := c.team("acme")
	tpl := acme.uploadTemplateFile("zip", fixtureZip(t, "lottie/synthetic"))
	if !slices.Equal(tpl.Compositions, []string{"kenburns"}) || !slices.Equal(tpl.Layers, []string{"Title", "Bar", "Photo"}) {
		t.Fatalf("inspection: compositions %v layers %v", tpl.Compositions, tpl.Layers)
	}
	files := newFileServer(t, map[string][]byte{"/replacement.jpg": fixture(t, "lottie/synthetic/images/replacement.jpg")})
	common := []map[string]any{
		{"type": "image", "layerName": "Photo", "src": files + "/replacement.jpg"},
		{"type": "data", "layerName": "Bar", "property": "Opacity", "value": 90},
	}
	withText := append(slices.Clone(common), map[string]any{"type": "text", "layerName": "Title", "value": "Zebra Quartz 42"})
	textJob, textVideo := acme.render(kenburnsJob(tpl.ID, withText...))
	_, baseVideo := acme.render(kenburnsJob(tpl.ID, common...))

	m := probe(t, textVideo, ".mp4")
	if m.Width != 1920 || m.Height != 1080 || m.Rate.String() != "30" || m.Codec != "h264" || m.Duration < 1.99 || m.Duration > 2.01 {
		t.Fatalf("video %+v", m)
	}
	text, base := frameOf(t, textVideo, 45), frameOf(t, baseVideo, 45)
	if d := framediff.Mean(text, base, image.Rect(300, 820, 1620, 960)); d < 3 {
		t.Fatalf("the title area barely differs (mean %.2f): the text was not injected", d)
	}
	if d := framediff.Mean(text, base, image.Rect(0, 0, 1920, 700)); d > 1.5 {
		t.Fatalf("the photo area differs (mean %.2f) though only the text changed", d)
	}
	if textJob.Progress != 100 || textJob.Stats.RenderDuration == nil {
		t.Fatalf("job %+v", textJob)
	}
	_, logs, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+textJob.ID+"/logs", nil)
	if !strings.Contains(string(logs), "rendering frames 0 to 59 at 1920x1080") {
		t.Fatalf("the engine's log is missing:\n%s", logs)
	}

	// A still, uploaded to the team's own S3 bucket.
	endpoint, accessKey, secretKey, bucketName, read := teamBucket(t)
	still := kenburnsJob(tpl.ID, withText...)
	still["settings"] = map[string]any{"type": "image", "frames": 45}
	still["upload"] = map[string]any{"provider": "s3", "params": map[string]any{"endpoint": endpoint, "region": "us-east-1",
		"bucket": bucketName, "accessKeyId": accessKey, "accessKeySecret": secretKey}}
	var stillJob created
	acme.must(http.MethodPost, "/api/v2/jobs", still, http.StatusCreated, &stillJob)
	if state := c.waitFor("job", stillJob.ID, "finished", "error"); state != "finished" {
		t.Fatalf("the still ended in %s:\n%s", state, acme.logs(stillJob.ID))
	}
	_, stillPNG := read(stillJob.ID + ".png") // the bucket is private: its own client reads it
	img, err := png.Decode(bytes.NewReader(stillPNG))
	if err != nil || img.Bounds().Dx() != 1920 {
		t.Fatalf("the still: %v", err)
	}
	if d := framediff.Mean(img, text, image.Rect(0, 0, 1920, 1080)); d > 3 {
		t.Fatalf("the still of frame 45 differs from the video's frame 45 (mean %.2f)", d)
	}
}

// TestTeamFontReachesTheLottieEngine: a job naming a team font renders its text with it.
func TestTeamFontReachesTheLottieEngine(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, realEngines: true})
	acme := c.team("acme")
	// CenteredText.json uses Helvetica, which is not installed: the text falls back to a
	// system font unless the job supplies one under that name.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("CenteredText.json")
	w.Write(fixture(t, "lottie/CenteredText.json"))
	zw.Close()
	tpl := acme.uploadTemplateFile("zip", buf.Bytes())
	zr, err := zip.NewReader(bytes.NewReader(fixture(t, "lottie/EmbeddedFont.zip")), int64(len(fixture(t, "lottie/EmbeddedFont.zip"))))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.Open("fonts/Comic Neue.ttf")
	if err != nil {
		t.Fatal(err)
	}
	comic, _ := io.ReadAll(rc)
	rc.Close()
	if status, body := acme.uploadFont("Helvetica.ttf", comic, ""); status != http.StatusCreated {
		t.Fatalf("font upload: %d %s", status, body)
	}
	job := func(fonts ...string) map[string]any {
		b := map[string]any{"template": map[string]any{"id": tpl.ID, "composition": tpl.Compositions[0]},
			"assets":   []map[string]any{{"type": "text", "layerName": "Text", "value": "Hamburgefonts"}},
			"settings": map[string]any{"type": "video", "frames": []int{0, 4}}}
		if fonts != nil {
			b["fonts"] = fonts
		}
		return b
	}
	_, withFont := acme.render(job("Helvetica.ttf"))
	_, without := acme.render(job())
	// 375x375, padded to even sizes as H.264 in yuv420p needs.
	if m := probe(t, withFont, ".mp4"); m.Width != 376 || m.Height != 376 || m.Codec != "h264" {
		t.Fatalf("video %+v", m)
	}
	a, b := frameOf(t, withFont, 2), frameOf(t, without, 2)
	if d := framediff.Mean(a, b, a.Bounds()); d < 0.3 {
		t.Fatalf("the team font made no difference (mean %.2f)", d)
	}
}

// TestNestedVideoAndJoinOfOutputs: a child job's video lands in the parent's image layer, and a
// join stitches two rendered outputs into one video as long as both.
func TestNestedVideoAndJoinOfOutputs(t *testing.T) {
	c := startCoordinator(t, options{slots: 2, realEngines: true})
	acme := c.team("acme")
	tpl := acme.uploadTemplateFile("zip", fixtureZip(t, "lottie/synthetic"))
	files := newFileServer(t, map[string][]byte{"/replacement.jpg": fixture(t, "lottie/synthetic/images/replacement.jpg")})
	_, base := acme.render(kenburnsJob(tpl.ID))
	// The child renders the same animation with another photo; its video takes the parent's
	// photo's place for its one second.
	childSettings := map[string]any{"type": "video", "frames": []int{0, 29}, "quality": "draft"}
	parent, nested := acme.render(kenburnsJob(tpl.ID, map[string]any{
		"type": "job", "layerName": "Photo", "template": map[string]any{"id": tpl.ID, "composition": "kenburns"},
		"assets":   []map[string]any{{"type": "image", "layerName": "Photo", "src": files + "/replacement.jpg"}},
		"settings": childSettings}))
	if len(parent.Children) != 1 || acme.job(parent.Children[0]).Status != "finished" {
		t.Fatalf("parent %+v", parent)
	}
	if d := framediff.Mean(frameOf(t, nested, 15), frameOf(t, base, 15), image.Rect(0, 0, 1920, 700)); d < 3 {
		t.Fatalf("the child's video is not in the parent (mean difference %.2f)", d)
	}

	short := kenburnsJob(tpl.ID)
	short["settings"] = map[string]any{"type": "video", "frames": []int{0, 29}}
	first, _ := acme.render(short)
	var joined created
	acme.must(http.MethodPost, "/api/v2/jobs/join", map[string]any{"assets": []any{
		map[string]any{"type": "video", "src": first.OutputURL},
		map[string]any{"type": "video", "src": parent.OutputURL},
	}}, http.StatusCreated, &joined)
	if state := c.waitFor("job", joined.ID, "finished", "error"); state != "finished" {
		t.Fatalf("join ended in %s: %v", state, *acme.job(joined.ID).Stats.Error)
	}
	_, stitched := get(t, acme.job(joined.ID).OutputURL)
	if m := probe(t, stitched, ".mp4"); m.Duration < 2.95 || m.Duration > 3.1 || m.Width != 1920 {
		t.Fatalf("joined %+v, want 1 s + 2 s", m)
	}
}

// TestAfterEffectsPathRunsThroughAerender: aep and mogrt templates show their compositions and
// layers; a job for ae2025 goes through the stand-in aerender and ffmpeg to an MP4.
func TestAfterEffectsPathRunsThroughAerender(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, realEngines: true})
	acme := c.team("acme")
	mogrt := acme.uploadTemplateFile("mogrt", fixture(t, "templates/vonstring_ae.mogrt"))
	if mogrt.Mogrt == nil || len(mogrt.Compositions) == 0 {
		t.Fatalf("mogrt %+v", mogrt)
	}
	tpl := acme.uploadTemplateFile("aep", fixture(t, "templates/nexrender_1layer.aep"))
	if len(tpl.Compositions) == 0 || len(tpl.Layers) == 0 {
		t.Fatalf("aep %+v", tpl)
	}
	j, out := acme.render(map[string]any{
		"template": map[string]any{"id": tpl.ID, "composition": tpl.Compositions[0]},
		"assets":   []map[string]any{{"type": "data", "layerName": tpl.Layers[0], "property": "Transform.Opacity", "expression": "50"}},
		"settings": map[string]any{"engine": "ae2025"}})
	if m := probe(t, out, ".mp4"); m.Codec != "h264" || m.Width != 640 || !m.HasAudio {
		t.Fatalf("output %+v", m)
	}
	_, logs, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+j.ID+"/logs", nil)
	if !strings.Contains(string(logs), "-RStemplate Best Settings") || !strings.Contains(string(logs), "PROGRESS:") {
		t.Fatalf("the aerender log is missing:\n%s", logs)
	}
	// After Effects features are refused at creation for a Lottie template.
	lottieTpl := acme.uploadTemplateFile("zip", fixtureZip(t, "lottie/synthetic"))
	e := acme.fails(http.MethodPost, "/api/v2/jobs", kenburnsJob(lottieTpl.ID, map[string]any{"type": "script", "src": "https://example.com/fix.jsx"}),
		http.StatusBadRequest, "validation_error")
	if len(e.Details) == 0 || e.Details[0].Field != "assets[0].type" || !strings.Contains(e.Details[0].Message, "After Effects") {
		t.Fatalf("refusal %+v", e)
	}
}

// stalledServer sends headers and a few bytes, then nothing until the test ends.
func stalledServer(t *testing.T) string {
	stalled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-stalled:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stalled) })
	return srv.URL
}

// TestStalledDownloadsEndInErrors: a template src or an asset served by a server that stalls
// holds the template or the job only until its download timeout.
func TestStalledDownloadsEndInErrors(t *testing.T) {
	slow := stalledServer(t)
	c := startCoordinator(t, options{slots: 1, config: "\n[node]\ndownload_timeout = \"300ms\"\n\n[templates]\ndownload_timeout = \"300ms\"\n"})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	var tpl templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "slow", "src": slow + "/t.zip"}, http.StatusCreated, &tpl)
	c.waitFor("template", tpl.ID, "error")
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
	if tpl.Error == nil || !strings.Contains(*tpl.Error, "took longer than the 300ms allowed") {
		t.Fatalf("template %+v", tpl)
	}
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID, map[string]any{"type": "image", "layerName": "Photo", "src": slow + "/slow.png"}), http.StatusCreated, &cr)
	c.waitJob(cr.ID, "error")
	if j := acme.job(cr.ID); j.Stats.Error == nil || !strings.Contains(*j.Stats.Error, "took longer than the 300ms allowed") {
		t.Fatalf("job %+v", j.Stats)
	}
}
