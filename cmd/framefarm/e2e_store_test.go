package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/persistence/porttest"
)

// The data folder in testdata/data-0fb8cdc.tar.gz was written by framefarm at commit 0fb8cdc (the
// release before schema versions): team "fixture" with a zip template, a secret, a finished job,
// a batch of 20 (10 finished, 10 queued; one more queued job cancelled), a join of two child jobs
// (pending, children queued); a second team's token made with `framefarm token create`. The
// process was killed with SIGKILL, so the folder is as a crash leaves it. Both tokens are
// fixture tokens of that folder only.
const (
	fixtureToken    = "ff_nRhZ18uOCHgB_rhBAtM9LHYUvbxq0LD-BTwHh2Kc1dU"
	fixture2Token   = "ff_Yw727Y5y_OdN-uxa8aXiA1sLlnSqsEr5ylSALbzRytM"
	fixtureTemplate = "01M8BJSMK667FMFW9XECGNGQC2"
	fixtureBatch    = "01M8BJTM2J4CNH9MHNCHHEGH7M"
	fixtureJoin     = "01M8BJTM2YPYPS7NKCYZMJ5JAV"
	fixtureFinished = "01M8BJT5CMT8VVA5ABPC2GF53N"
)

// TestUpgradeOpensTheFolderOfThePreviousRelease: every record of a folder the previous release
// wrote is there after the upgrade, and its queued jobs and pending join then run to the end.
func TestUpgradeOpensTheFolderOfThePreviousRelease(t *testing.T) {
	// The previous release kept its files in the data folder: the local backend opens them.
	c := newCoordinator(t, options{slots: 2, config: "\n[objects]\nbackend = \"local\"\n"})
	untar(t, "testdata/data-0fb8cdc.tar.gz", c.dataDir())
	c.control.answerAll(finishAll)
	c.launch("127.0.0.1:0")
	fixture := &client{c: c, token: fixtureToken}

	var jobs []job
	fixture.must(http.MethodGet, "/api/v2/jobs?limit=100&sort=oldest_first", nil, http.StatusOK, &jobs)
	if len(jobs) != 25 {
		t.Fatalf("%d jobs after the upgrade, want 25", len(jobs))
	}
	for _, j := range jobs {
		if j.Status == "queued" || j.Status == "pending" || j.Status == "render:dorender" {
			c.waitJob(j.ID, "finished")
		}
	}
	states := map[string]int{}
	fixture.must(http.MethodGet, "/api/v2/jobs?limit=100", nil, http.StatusOK, &jobs)
	for _, j := range jobs {
		states[j.Status]++
	}
	if states["finished"] != 24 || states["manually_cancelled"] != 1 {
		t.Fatalf("states once the queue ran: %v", states)
	}
	if j := fixture.job(fixtureJoin); len(j.Children) != 2 || j.Status != "finished" {
		t.Fatalf("join %+v", j)
	}
	if status, out := get(t, fixture.job(fixtureFinished).OutputURL); status != http.StatusOK || len(out) == 0 {
		t.Fatalf("output of a job finished before the upgrade: %d, %d bytes", status, len(out))
	}

	var tpl templateAnswer
	fixture.must(http.MethodGet, "/api/v2/templates/"+fixtureTemplate, nil, http.StatusOK, &tpl)
	if tpl.Status != "uploaded" || !slices.Equal(tpl.Compositions, []string{"Name"}) {
		t.Fatalf("template %+v", tpl)
	}
	// The template, inspected before layers had ids and times, is read again at start.
	c.waitFor("template", fixtureTemplate, "reinspected")
	var layers []cliLayer
	fixture.must(http.MethodGet, "/api/v3/templates/"+fixtureTemplate+"/layers", nil, http.StatusOK, &layers)
	if len(layers) != 1 || layers[0].Name != "NAME" || layers[0].OutPoint == 0 || layers[0].CompositionID != 1 {
		t.Fatalf("layers after the upgrade %+v", layers)
	}
	var batch struct {
		Jobs []struct{ Status string } `json:"jobs"`
	}
	fixture.must(http.MethodGet, "/api/v2/batches/"+fixtureBatch, nil, http.StatusOK, &batch)
	if len(batch.Jobs) != 20 {
		t.Fatalf("batch of %d jobs", len(batch.Jobs))
	}
	var secrets []struct{ Name string }
	fixture.must(http.MethodGet, "/api/v2/secrets", nil, http.StatusOK, &secrets)
	if len(secrets) != 1 || secrets[0].Name != "hook_token" {
		t.Fatalf("secrets %+v", secrets)
	}
	(&client{c: c, token: fixture2Token}).must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, nil)

	// The upgrade ran once: a restart opens the upgraded folder as it is.
	c.stop()
	c.restart()
	fixture.must(http.MethodGet, "/api/v2/jobs/"+fixtureJoin, nil, http.StatusOK, nil)
}

// untar unpacks a .tar.gz of plain files and folders into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("archive entry %q leaves the folder", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o700)
		case tar.TypeReg:
			err = writeFile(path, tr)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestRetentionRemovesEndedJobsFromTheAPI: with [jobs] retention = "1s", a finished job and its
// output are gone within a sweep, while a job still rendering stays.
func TestRetentionRemovesEndedJobsFromTheAPI(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, config: "\n[jobs]\nretention = \"1s\"\n"})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var done, busy created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &done)
	c.control.next(t).answer(finishAll(nil))
	c.waitJob(done.ID, "finished")
	output := acme.job(done.ID).OutputURL
	if status, _ := get(t, output); status != http.StatusOK {
		t.Fatalf("output before retention: %d", status)
	}
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &busy)
	call := c.control.next(t) // the render goes on until the end of the test
	c.waitMetric(t, `framefarm_retention_removed_total{record="jobs"} 1`)
	acme.fails(http.MethodGet, "/api/v2/jobs/"+done.ID, nil, http.StatusNotFound, "not_found")
	if status, _ := get(t, output); status != http.StatusNotFound {
		t.Fatalf("output after retention: %d, want 404", status)
	}
	acme.must(http.MethodGet, "/api/v2/jobs/"+busy.ID, nil, http.StatusOK, nil)
	call.answer(finishAll(nil))
}

// TestDebugListenerServesProfiles: with [debug] listen, the coordinator serves Go's profiles on
// that loopback address, and nothing of the API there.
func TestDebugListenerServesProfiles(t *testing.T) {
	addr := porttest.FreeAddr(t)
	startCoordinator(t, options{config: fmt.Sprintf("\n[debug]\nlisten = %q\n", addr)})
	if status, body := get(t, "http://"+addr+"/debug/pprof/heap?debug=1"); status != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.100s", status, body)
	}
	if status, _ := get(t, "http://"+addr+"/api/v2/jobs"); status != http.StatusNotFound {
		t.Fatalf("the API on the debug listener: %d, want 404", status)
	}
}

// TestOutputURLFromCreationServesTheOutput: the outputUrl a creation answers with serves the
// output once the job finishes, whichever attempt finished it.
func TestOutputURLFromCreationServesTheOutput(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
	if status, _ := get(t, cr.OutputURL); status != http.StatusNotFound {
		t.Fatalf("output before the render: %d", status)
	}
	c.control.next(t).answer(renderReply{Result: "retry", Message: "node hiccup"})
	c.control.next(t).answer(finishAll(nil))
	c.waitJob(cr.ID, "finished")
	status, out := get(t, cr.OutputURL)
	var rendered renderCall
	if status != http.StatusOK || json.Unmarshal(out, &rendered) != nil || rendered.Attempt != 2 {
		t.Fatalf("the creation's outputUrl: %d %s, want attempt 2's output", status, out)
	}
	// Served as a download; one the coordinator serves itself, a browser will not sniff (a
	// bucket serves from an origin of its own).
	resp, err := http.Get(cr.OutputURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if (bucket == nil && resp.Header.Get("X-Content-Type-Options") != "nosniff") || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), `attachment; filename="`+cr.ID) {
		t.Fatalf("output headers %v", resp.Header)
	}
	// The job's own outputUrl names the same file (its signature's expiry may differ).
	if j := acme.job(cr.ID); strings.Split(j.OutputURL, "?")[0] != strings.Split(cr.OutputURL, "?")[0] {
		t.Fatalf("the job's outputUrl %s names another file than the creation's %s", j.OutputURL, cr.OutputURL)
	}
}

// TestTokenCreateWhileTheServerRuns: a first start says how to get a token, and `framefarm
// token create` then works in another terminal, through the running server.
func TestTokenCreateWhileTheServerRuns(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	c.stdout.waitFor(waitLimit, " token create --data-dir "+c.dataDir())
	if out := c.stdout.String(); !strings.Contains(out, "no team yet") || !strings.Contains(out, " token create --data-dir "+c.dataDir()) {
		t.Fatalf("first start printed:\n%s", out)
	}
	out, err := framefarm("token", "create", "--data-dir", c.dataDir(), "--team", "first")
	if err != nil {
		t.Fatalf("token create while the server runs: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	first := &client{c: c, token: lines[len(lines)-1]}
	var team struct{ Name string }
	first.must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, &team)
	if team.Name != "first" {
		t.Fatalf("the token is team %q's", team.Name)
	}
}
