package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
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
	farmAdmin := localAdminToken(t, c) // made at random at its first start: not in the backup
	out, err := framefarm("backup", "--url", c.url, "--admin-token", adminToken, "--out", file)
	stop()
	<-stopped
	if err != nil || !strings.Contains(string(out), "a backup by framefarm") {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	t.Logf("backup: %s(%d jobs acknowledged before it began, %d in all)", out, len(before), len(acked))

	restored := newCoordinator(t, options{slots: 1, config: folder})
	restored.control.answerAll(finishAll)
	// A backup altered to carry a file no backup writes, its manifest and digests made to
	// match, is refused and leaves nothing.
	planted := filepath.Join(t.TempDir(), "planted.tar")
	repackBackup(t, file, planted, "local-admin.json", []byte(`{"url":"http://127.0.0.1:1","token":"ffl_planted"}`))
	if out, err := framefarm("restore", "--data-dir", restored.dataDir(), planted); err == nil || !strings.Contains(string(out), `"local-admin.json" that no backup holds`) {
		t.Fatalf("a backup with a planted file: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(restored.dataDir()); len(entries) != 0 {
		t.Fatalf("the refused restore left %d entries", len(entries))
	}
	if out, err := framefarm("restore", "--data-dir", restored.dataDir(), file); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if out, err := framefarm("restore", "--data-dir", restored.dataDir(), file); err == nil {
		t.Fatalf("a second restore into the same folder was taken:\n%s", out)
	}
	restored.launch("127.0.0.1:0")
	// The admin token of the farm backed up opens the restored farm's admin routes, as its own.
	for _, token := range []string{farmAdmin, localAdminToken(t, restored)} {
		(&client{c: restored, token: token}).must(http.MethodGet, "/api/v2/admin/teams", nil, http.StatusOK, nil)
	}
	(&client{c: restored, token: "ffl_planted"}).fails(http.MethodGet, "/api/v2/admin/teams", nil, http.StatusUnauthorized, "unauthorized")
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

// repackBackup writes to the file to a backup's entries with one more, named name, listed in its
// manifest and its digests as a backup lists its own: what an attacker who alters a backup writes.
func repackBackup(t *testing.T, from, to, name string, data []byte) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	var sums strings.Builder
	add := func(hdr *tar.Header, body []byte) {
		hdr.Size = int64(len(body))
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(body), hdr.Name)
	}
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		switch hdr.Name {
		case "manifest.json":
			var m map[string]any
			json.Unmarshal(body, &m)
			m["entries"] = append(m["entries"].([]any), map[string]any{"name": name, "size": len(data)})
			body, _ = json.Marshal(m)
		case "SHA256SUMS":
			add(&tar.Header{Name: name, Mode: 0o600, Typeflag: tar.TypeReg}, data)
			hdr.Size = int64(sums.Len())
			tw.WriteHeader(hdr)
			tw.Write([]byte(sums.String()))
			tw.Close()
			return
		}
		add(hdr, body)
	}
}
