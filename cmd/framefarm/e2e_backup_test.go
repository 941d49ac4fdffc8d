package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestABackupTakenDuringIntakeRestoresTheFarm: a backup taken while a client creates jobs holds
// every job acknowledged before it began; restored into an empty folder, the farm serves them,
// and its token, secret, font and template work there.
func TestABackupTakenDuringIntakeRestoresTheFarm(t *testing.T) {
	const folder = "\n[objects]\nbackend = \"local\"\n"
	c := startCoordinator(t, options{slots: 1, config: folder})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	font, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatal("fonts-dejavu-core is not installed (make setup installs it): ", err)
	}
	if status, body := acme.uploadFont("Brand.ttf", font, ""); status != http.StatusCreated {
		t.Fatalf("font: %d %s", status, body)
	}
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "GREETING", "value": "hello from before the backup"}, http.StatusCreated, nil)
	withSecret := func() map[string]any {
		b := renderJob(tplID, map[string]any{"type": "data", "layerName": "Title", "property": "Source Text", "value": `"${secret.GREETING}"`})
		b["fonts"] = []string{"Brand.ttf"}
		return b
	}
	var first created
	acme.must(http.MethodPost, "/api/v2/jobs", withSecret(), http.StatusCreated, &first)
	c.waitJob(first.ID, "finished")

	// A client creates jobs, one after another, until told to stop.
	var mu sync.Mutex
	var acked []string
	intake, stop := context.WithCancel(context.Background())
	enough, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for intake.Err() == nil {
			status, body, _ := acme.call(http.MethodPost, "/api/v2/jobs", renderJob(tplID))
			var j created
			if status != http.StatusCreated || json.Unmarshal(body, &j) != nil {
				continue
			}
			mu.Lock()
			if acked = append(acked, j.ID); len(acked) == 50 {
				close(enough)
			}
			mu.Unlock()
		}
	}()
	<-enough
	mu.Lock()
	before := slices.Clone(acked)
	mu.Unlock()
	file := filepath.Join(t.TempDir(), "farm.tar")
	out, err := framefarm("backup", "--url", c.url, "--admin-token", adminToken, "--out", file)
	stop()
	<-stopped
	if err != nil || !strings.Contains(string(out), "a backup by framefarm") {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	t.Logf("backup: %s(%d jobs acknowledged before it began, %d in all)", out, len(before), len(acked))

	restored := newCoordinator(t, options{slots: 1, config: folder})
	restored.control.answerAll(finishAll)
	if out, err := framefarm("restore", "--data-dir", restored.dataDir(), file); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if out, err := framefarm("restore", "--data-dir", restored.dataDir(), file); err == nil {
		t.Fatalf("a second restore into the same folder was taken:\n%s", out)
	}
	restored.launch("127.0.0.1:0")
	again := &client{c: restored, token: acme.token}
	for _, id := range append(before, first.ID) {
		if j := again.job(id); j.ID != id {
			t.Fatalf("job %s after the restore: %+v", id, j)
		}
	}
	var after created
	again.must(http.MethodPost, "/api/v2/jobs", withSecret(), http.StatusCreated, &after)
	restored.waitJob(after.ID, "finished")
	call, was := again.renderOutput(after.ID), acme.renderOutput(first.ID)
	if call.TemplateSHA != was.TemplateSHA || len(call.Fonts) != 1 || call.Fonts[0].SHA256 != was.Fonts[0].SHA256 ||
		len(call.Assets) != 1 || !strings.Contains(call.Assets[0].Value, "hello from before the backup") {
		t.Fatalf("a render after the restore got %+v, before it %+v", call, was)
	}
}
