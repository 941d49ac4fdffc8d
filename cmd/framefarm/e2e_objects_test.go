package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/s3store"
)

// TestALocalFarmMovesIntoABucket: `objects copy --to s3` copies a local farm's files into the
// bucket, with progress, and a second run finds them all there; with the backend switched and
// the local folder gone, the old output URL, the template's download and a new render with the
// old template and font all work from the bucket.
func TestALocalFarmMovesIntoABucket(t *testing.T) {
	srv := testBucket(t)
	c := startCoordinator(t, options{slots: 1, config: "\n[objects]\nbackend = \"local\"\n"})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	font, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatal("fonts-dejavu-core is not installed (make setup installs it): ", err)
	}
	if status, body := acme.uploadFont("Brand.ttf", font, ""); status != http.StatusCreated {
		t.Fatalf("font upload: %d %s", status, body)
	}
	tplID := acme.uploadTemplate(inspection())
	withFont := func() map[string]any {
		b := renderJob(tplID)
		b["fonts"] = []string{"Brand.ttf"}
		return b
	}
	var before created
	acme.must(http.MethodPost, "/api/v2/jobs", withFont(), http.StatusCreated, &before)
	c.waitJob(before.ID, "finished")
	outputURL := acme.job(before.ID).OutputURL
	_, output := get(t, outputURL)
	var download struct{ URL string }
	acme.must(http.MethodGet, "/api/v2/templates/"+tplID+"/download", nil, http.StatusOK, &download)
	_, template := get(t, download.URL)
	c.stop()

	config := filepath.Join(c.dir, "framefarm.toml")
	toml, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	local := strings.Replace(string(toml), "\n[objects]\nbackend = \"local\"\n", s3Config(srv, "local", t.Name()), 1)
	os.WriteFile(config, []byte(local), 0o600)
	copyAll := func() string {
		t.Helper()
		out, err := framefarm("objects", "copy", "--to", "s3", "--config", config, "--data-dir", c.dataDir(), "--progress", "1h")
		if err != nil || !strings.Contains(string(out), "every object is in the bucket") {
			t.Fatalf("objects copy: %v\n%s", err, out)
		}
		return string(out)
	}
	// The template, its upload copy, the font and the output.
	objects, bytes := int64(0), int64(0)
	filepath.WalkDir(filepath.Join(c.dataDir(), "objects"), func(_ string, d os.DirEntry, _ error) error {
		if info, err := d.Info(); err == nil && !d.IsDir() {
			objects, bytes = objects+1, bytes+info.Size()
		}
		return nil
	})
	if objects < 3 {
		t.Fatalf("the local store holds %d objects", objects)
	}
	total := fmt.Sprintf("%d of %d objects (%s of %s) in the bucket", objects, objects, byteCount(bytes), byteCount(bytes))
	if out := copyAll(); !strings.Contains(out, total+", 0 of them there already, 0 failed") {
		t.Fatalf("first copy, want %q:\n%s", total, out)
	}
	if out := copyAll(); !strings.Contains(out, fmt.Sprintf("%s, %d of them there already, 0 failed", total, objects)) {
		t.Fatalf("second copy, want every object there already:\n%s", out)
	}

	os.WriteFile(config, []byte(strings.Replace(local, "backend = \"local\"", "backend = \"s3\"", 1)), 0o600)
	if err := os.RemoveAll(filepath.Join(c.dataDir(), "objects")); err != nil {
		t.Fatal(err)
	}
	c.restart()
	if status, got := get(t, outputURL); status != http.StatusOK || string(got) != string(output) {
		t.Fatalf("the old output URL: %d, %d bytes of %d", status, len(got), len(output))
	}
	acme.must(http.MethodGet, "/api/v2/templates/"+tplID+"/download", nil, http.StatusOK, &download)
	if status, got := get(t, download.URL); status != http.StatusOK || string(got) != string(template) {
		t.Fatalf("the template's download: %d, %d bytes of %d", status, len(got), len(template))
	}
	var after created
	acme.must(http.MethodPost, "/api/v2/jobs", withFont(), http.StatusCreated, &after)
	c.waitJob(after.ID, "finished")
	call := acme.renderOutput(after.ID)
	if call.TemplateSHA != sha(template) || len(call.Fonts) != 1 || call.Fonts[0].SHA256 != sha(font) {
		t.Fatalf("a render after the move got template %s and fonts %+v", call.TemplateSHA, call.Fonts)
	}
}

// TestRendersWaitForTheBucket: with the bucket out of reach, a render that cannot fetch its
// template, and a large one whose upload cannot begin, are queued again, their logs say why, no
// attempt counts (more of them than max_attempts fail no job) and none finishes; a small output
// whose put fails is sent again by its node without rendering anew. Once the bucket answers every
// job finishes with its output.
func TestRendersWaitForTheBucket(t *testing.T) {
	srv := testBucket(t)
	gate := srv.Gate(t)
	objects := strings.Replace(s3ConfigVia(srv, gate.Endpoint, "s3", t.Name()), "backend = \"s3\"\n", "backend = \"s3\"\nretry_after = \"100ms\"\n", 1)
	c := startCoordinator(t, options{slots: 1, config: "\n[jobs]\nmax_attempts = 2\n" + objects})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	open := func() {
		t.Helper()
		if err := gate.Open(); err != nil {
			t.Fatal(err)
		}
	}
	notFinished := func(id, why string) {
		t.Helper()
		if logs := acme.logs(id); !strings.Contains(logs, why) {
			t.Fatalf("the log of %s does not say %q:\n%s", id, why, logs)
		}
		if j := acme.job(id); j.Status == "finished" || j.Status == "error" {
			t.Fatalf("job %s is %s while the bucket is out of reach", id, j.Status)
		}
	}

	gate.Close()
	var fetching created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &fetching)
	c.waitCount("job", fetching.ID, "queued", 4) // queued at creation, then after three failed fetches
	notFinished(fetching.ID, "the farm's storage failed the attempt, which does not count: queued again in 100ms")
	open()
	c.control.next(t).answer(renderReply{Result: "finish"})
	c.waitJob(fetching.ID, "finished")

	var large created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &large)
	call := c.control.next(t)
	gate.Close()
	call.answer(renderReply{Result: "finish", Size: 12 << 20})
	c.waitCount("job", large.ID, "queued", 2)
	notFinished(large.ID, "no place in the object store for the output")
	open()
	c.control.next(t).answer(renderReply{Result: "finish", Size: 12 << 20})
	c.waitJob(large.ID, "finished")

	var small created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &small)
	call = c.control.next(t)
	gate.Close()
	call.answer(renderReply{Result: "finish"})
	c.stderr.waitFor(waitLimit, "a part of an output did not reach the object store")
	notFinished(small.ID, "") // the node's log reaches the job with its report
	open()
	c.waitJob(small.ID, "finished") // no render asked again: the node kept its output
	if logs := acme.logs(small.ID); !strings.Contains(logs, "did not reach the object store") {
		t.Fatalf("the log does not tell of the part sent again:\n%s", logs)
	}
	for _, id := range []string{fetching.ID, large.ID, small.ID} {
		if out := acme.renderOutput(id); out.JobID != id {
			t.Fatalf("output of %s: %+v", id, out)
		}
	}
}

// TestStartRefusesABucketOrKeysItCannotUse: a start whose bucket refuses its credentials, or
// whose URL-signing or secrets key is not the one its store was written with, ends at once with
// one line saying so.
func TestStartRefusesABucketOrKeysItCannotUse(t *testing.T) {
	srv := testBucket(t)
	keys := func(signing, secrets string) string {
		return fmt.Sprintf("signing_key = %q\n[secrets]\nkey = %q\n", signing, secrets)
	}
	keyA, keyB := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="
	objects := s3Config(srv, "s3", t.Name())
	withKeys := func(signing, secrets string) string {
		return strings.Replace(objects, "\n[objects.s3]", keys(signing, secrets)+"\n[objects.s3]", 1)
	}
	c := startCoordinator(t, options{slots: 1, config: withKeys(keyA, keyA)})
	c.stop()
	config := filepath.Join(c.dir, "framefarm.toml")
	toml, _ := os.ReadFile(config)
	for _, tc := range []struct{ name, from, to, want string }{
		{"wrong secret", "secret_access_key = \"" + srv.SecretKey, "secret_access_key = \"not-the-secret", "credentials are refused"},
		{"another URL-signing key", keys(keyA, keyA), keys(keyB, keyA), "the URL-signing key is not the one this store was written with"},
		{"another secrets key", keys(keyA, keyA), keys(keyA, keyB), "the secrets key is not the one this store was written with"},
	} {
		changed := strings.Replace(string(toml), tc.from, tc.to, 1)
		if changed == string(toml) {
			t.Fatalf("%s: the configuration has no %q", tc.name, tc.from)
		}
		os.WriteFile(config, []byte(changed), 0o600)
		out, err := refusedStart(t, config, c.dataDir())
		if err == nil || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("%s: %v, want one line saying %q:\n%s", tc.name, err, tc.want, out)
		}
	}
	os.WriteFile(config, toml, 0o600)
	c.restart()
}

// refusedStart runs `serve` expecting it to refuse to start, and returns what it said (its log
// lines left out).
func refusedStart(t *testing.T, config, dataDir string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--config", config, "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), envRun+"=1")
	out, err := cmd.CombinedOutput()
	var said []string
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "framefarm:") {
			said = append(said, line)
		}
	}
	return strings.Join(said, ""), err
}

// TestLargeOutputsGoUpInParts: an output above the part size reaches the bucket in parts, whole,
// and downloads through its outputUrl; none of it passes through the coordinator, which the
// same render with the files in the local folder shows it would otherwise.
func TestLargeOutputsGoUpInParts(t *testing.T) {
	srv := testBucket(t)
	c := startCoordinator(t, options{slots: 1, config: s3Config(srv, "s3", t.Name())})
	c.control.answerAll(func(*renderCall) renderReply { return renderReply{Result: "finish", Size: 12 << 20} })
	acme := c.team("acme")
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(acme.uploadTemplate(inspection())), http.StatusCreated, &cr)
	c.waitJob(cr.ID, "finished")
	status, out := get(t, acme.job(cr.ID).OutputURL)
	var call renderCall
	if status != http.StatusOK || len(out) != 12<<20 || json.Unmarshal(out, &call) != nil || call.JobID != cr.ID {
		t.Fatalf("output: %d, %d bytes", status, len(out))
	}
	if logs := acme.logs(cr.ID); !strings.Contains(logs, "3 parts") {
		t.Fatalf("the log does not tell of the parts:\n%s", logs)
	}
	if through := c.traffic("api", "objects"); through > 1<<20 {
		t.Fatalf("%.0f bytes went through the coordinator for an output of %d in the bucket", through, 12<<20)
	}

	local := startCoordinator(t, options{slots: 1, config: "\n[objects]\nbackend = \"local\"\n"})
	local.control.answerAll(func(*renderCall) renderReply { return renderReply{Result: "finish", Size: 12 << 20} })
	other := local.team("acme")
	other.must(http.MethodPost, "/api/v2/jobs", renderJob(other.uploadTemplate(inspection())), http.StatusCreated, &cr)
	local.waitJob(cr.ID, "finished")
	if status, out := get(t, other.job(cr.ID).OutputURL); status != http.StatusOK || len(out) != 12<<20 {
		t.Fatalf("local output: %d, %d bytes", status, len(out))
	}
	if through := local.traffic("api"); through < 2*12<<20 {
		t.Fatalf("the local store's output went in and out through the coordinator's port, yet it counted %.0f bytes", through)
	}
}

// TestANodeKilledMidUploadLeavesNoObject: a node killed once its output's upload is planned
// leaves no object where its attempt's output would be (a multipart upload is whole only once
// the coordinator completes it), only an unfinished upload the janitor gives up; the job renders
// again elsewhere and its output is whole.
func TestANodeKilledMidUploadLeavesNoObject(t *testing.T) {
	srv := testBucket(t)
	c := startCoordinator(t, options{cluster: true, config: s3Config(srv, "s3", t.Name())})
	cl := c.team("cluster")
	first := c.startNode("n1", 1)
	tpl := cl.uploadTemplate(inspection())
	var cr created
	cl.must(http.MethodPost, "/api/v2/jobs", renderJob(tpl), http.StatusCreated, &cr)
	const size = 48 << 20 // ten parts of 5 MiB
	c.control.next(t).answer(renderReply{Result: "finish", Size: size})
	if c.stderr.waitFor(waitLimit, "planned an output's upload to the object store") == "" {
		t.Fatal("the node never planned the output's upload")
	}
	first.kill()
	c.waitNode("n1", actors.NodeLost)
	c.control.answerAll(func(*renderCall) renderReply { return renderReply{Result: "finish", Size: size} })
	c.startNode("n2", 1)
	c.waitJob(cr.ID, "finished")

	bucket, err := s3store.Open(t.Context(), s3store.Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Prefix: t.Name() + "/", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Head("outputs/" + cr.ID + "/1/" + cr.ID + ".mp4"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the killed node's attempt left an object: %v", err)
	}
	// What it left is an unfinished upload, which the janitor gives up once old enough.
	if n, err := bucket.AbortUploads(t.Context(), "outputs/"+cr.ID+"/1/", time.Now()); n != 1 || err != nil {
		t.Fatalf("unfinished uploads of the killed node's attempt: %d, %v", n, err)
	}
	status, out := get(t, cl.job(cr.ID).OutputURL)
	var call renderCall
	if status != http.StatusOK || len(out) != size || json.Unmarshal(out, &call) != nil || call.Node != "n2" || call.Attempt != 2 {
		t.Fatalf("output: %d, %d bytes, from %s attempt %d", status, len(out), call.Node, call.Attempt)
	}
	if nodes := c.traffic("nodes"); nodes == 0 || nodes > 1<<20 {
		t.Fatalf("the messages with the nodes counted %.0f bytes", nodes)
	}
}
