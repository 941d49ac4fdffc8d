package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/framefarm/framefarm/renderer"
)

func TestTemplateLifecycle(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	var tpl templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Promo"}, http.StatusCreated, &tpl)
	if tpl.Status != "awaiting_upload" || tpl.UploadInfo == nil || tpl.UploadInfo.Method != "PUT" || tpl.UploadInfo.ExpiresIn != 3600 ||
		tpl.UploadInfo.Key == "" || tpl.UploadInfo.Fields["Content-Type"] != "application/octet-stream" {
		t.Fatalf("new template %+v", tpl)
	}
	// The upload URL is bound to its signature.
	acme.put(strings.Replace(tpl.UploadInfo.URL, "sig=", "sig=0", 1), []byte("x"), http.StatusForbidden)
	// Nothing to download before the upload; mogrt is left out of templates that are not mogrt.
	acme.fails(http.MethodGet, "/api/v2/templates/"+tpl.ID+"/download", nil, http.StatusNotFound, "not_found")
	if _, raw, _ := acme.call(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil); strings.Contains(string(raw), `"mogrt"`) {
		t.Fatalf("a zip template carries mogrt: %s", raw)
	}
	// A fresh upload URL works as well as the first.
	var fresh struct {
		URL string `json:"url"`
	}
	acme.must(http.MethodPut, "/api/v2/templates/"+tpl.ID+"/upload", nil, http.StatusOK, &fresh)
	acme.put(fresh.URL, templateZip(t, inspection()), http.StatusOK)
	c.waitFor("template", tpl.ID, "uploaded")

	var comps []renderer.Composition
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID+"/compositions", nil, http.StatusOK, &comps)
	if len(comps) != 2 || comps[0].Name != "main" || comps[0].Layers[0].Text != "Hello" {
		t.Fatalf("compositions %+v", comps)
	}
	var renamed templateAnswer
	acme.must(http.MethodPatch, "/api/v2/templates/"+tpl.ID, map[string]string{"displayName": "Promo v2"}, http.StatusOK, &renamed)
	acme.fails(http.MethodPatch, "/api/v2/templates/"+tpl.ID, map[string]string{"displayName": " "}, http.StatusBadRequest, "validation_error")
	var list []map[string]any
	acme.must(http.MethodGet, "/api/v2/templates", nil, http.StatusOK, &list)
	if len(list) != 1 || list[0]["displayName"] != "Promo v2" {
		t.Fatalf("list %v", list)
	}
	var download struct {
		URL string `json:"url"`
	}
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID+"/download", nil, http.StatusOK, &download)
	if status, data := get(t, download.URL); status != http.StatusOK || !bytes.Equal(data, templateZip(t, inspection())) {
		t.Fatalf("download: %d, %d bytes", status, len(data))
	}

	// Delete: refused while a queued job uses it, done once the job is cancelled.
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tpl.ID), http.StatusCreated, &cr)
	acme.fails(http.MethodDelete, "/api/v2/templates/"+tpl.ID, nil, http.StatusConflict, "conflict")
	acme.must(http.MethodPatch, "/api/v2/jobs/"+cr.ID+"/cancel", nil, http.StatusOK, nil)
	if status, _, _ := acme.call(http.MethodDelete, "/api/v2/templates/"+tpl.ID, nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	acme.fails(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusNotFound, "template_not_found")
	if status, _ := get(t, download.URL); status != http.StatusNotFound {
		t.Fatalf("deleted template's file still served: %d", status)
	}
}

// TestUploadURLsReplaceAFileOnlyWhenAsked: once a template has its file, its upload URL refuses
// another body (the template stays as it was). PUT /templates/{id}/upload opens a new window
// for a replacement, with a URL of its own which the next file closes; the URLs of earlier
// windows never come back to life.
func TestUploadURLsReplaceAFileOnlyWhenAsked(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	var tpl templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Promo"}, http.StatusCreated, &tpl)
	acme.put(tpl.UploadInfo.URL, templateZip(t, inspection()), http.StatusOK)
	c.waitFor("template", tpl.ID, "uploaded")

	acme.put(tpl.UploadInfo.URL, []byte("not a template"), http.StatusConflict)
	var after templateAnswer
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &after)
	if after.Status != "uploaded" || len(after.Compositions) != 2 {
		t.Fatalf("a refused upload changed the template: %+v", after)
	}

	var fresh struct {
		URL string `json:"url"`
	}
	acme.must(http.MethodPut, "/api/v2/templates/"+tpl.ID+"/upload", nil, http.StatusOK, &fresh)
	if fresh.URL == tpl.UploadInfo.URL {
		t.Fatal("the new window's URL is the first one's")
	}
	// The first URL, used already, is refused while the new window is open: whoever kept it
	// cannot put their file in.
	acme.put(tpl.UploadInfo.URL, []byte("not a template"), http.StatusConflict)
	// Asking again while the window is open gives a URL of the same window.
	var again struct {
		URL string `json:"url"`
	}
	acme.must(http.MethodPut, "/api/v2/templates/"+tpl.ID+"/upload", nil, http.StatusOK, &again)
	if windowOf(again.URL) != windowOf(fresh.URL) {
		t.Fatalf("asked twice, two windows: %s and %s", fresh.URL, again.URL)
	}
	replacement := inspection()
	replacement.Compositions = replacement.Compositions[:1]
	acme.put(fresh.URL, templateZip(t, replacement), http.StatusOK)
	c.waitCount("template", tpl.ID, "uploaded", 2)
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &after)
	if after.Status != "uploaded" || len(after.Compositions) != 1 {
		t.Fatalf("the replacement was not inspected: %+v", after)
	}
	acme.put(fresh.URL, templateZip(t, inspection()), http.StatusConflict)
	acme.put(again.URL, templateZip(t, inspection()), http.StatusConflict)

	// A third window: both earlier URLs stay refused, its own serves once.
	var third struct {
		URL string `json:"url"`
	}
	acme.must(http.MethodPut, "/api/v2/templates/"+tpl.ID+"/upload", nil, http.StatusOK, &third)
	for _, old := range []string{tpl.UploadInfo.URL, fresh.URL} {
		acme.put(old, templateZip(t, inspection()), http.StatusConflict)
	}
	acme.put(third.URL, templateZip(t, inspection()), http.StatusOK)
	c.waitCount("template", tpl.ID, "uploaded", 3)
	acme.put(third.URL, templateZip(t, inspection()), http.StatusConflict)
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &after)
	if len(after.Compositions) != 2 {
		t.Fatalf("the third window's file is not the template's: %+v", after)
	}
}

// windowOf is the path of an upload URL, which names its window.
func windowOf(raw string) string {
	path, _, _ := strings.Cut(raw, "?")
	return path
}

func TestTemplateErrors(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	acme.fails(http.MethodPost, "/api/v2/templates", map[string]string{"type": "psd", "displayName": "x"}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPost, "/api/v2/templates", map[string]string{"type": "aep"}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPost, "/api/v2/templates", map[string]any{"type": "aep", "displayName": "x", "extra": 1}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPost, "/api/v2/templates", "{", http.StatusBadRequest, "invalid_json")
	acme.fails(http.MethodPost, "/api/v2/templates", map[string]string{"type": "aep", "displayName": "x", "src": "ftp://example.com/a.aep"}, http.StatusBadRequest, "validation_error")

	// A zip uploaded as an aep ends in error saying what the file really is.
	var tpl templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "aep", "displayName": "Wrong"}, http.StatusCreated, &tpl)
	acme.put(tpl.UploadInfo.URL, templateZip(t, inspection()), http.StatusOK)
	c.waitFor("template", tpl.ID, "error")
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
	if tpl.Error == nil || !strings.Contains(*tpl.Error, "zip archive") || !strings.Contains(*tpl.Error, "aep") {
		t.Fatalf("error %v", tpl.Error)
	}
	// A damaged project ends in error with what is wrong; the template cannot be used.
	aep, err := os.ReadFile("../../renderer/testdata/fixtures/templates/nexrender_1layer.aep")
	if err != nil {
		t.Fatal(err)
	}
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "aep", "displayName": "Damaged"}, http.StatusCreated, &tpl)
	acme.put(tpl.UploadInfo.URL, aep[:len(aep)/2], http.StatusOK)
	c.waitFor("template", tpl.ID, "error")
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
	if tpl.Error == nil || !strings.Contains(*tpl.Error, "damaged project") || len(tpl.Layers) != 0 {
		t.Fatalf("damaged aep template %+v", tpl)
	}
	acme.fails(http.MethodGet, "/api/v2/templates/"+tpl.ID+"/compositions", nil, http.StatusConflict, "template_not_ready")
	acme.fails(http.MethodPost, "/api/v2/jobs", renderJob(tpl.ID), http.StatusBadRequest, "template_not_ready")
	// The whole project is read: compositions, layers, engines.
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "aep", "displayName": "Real"}, http.StatusCreated, &tpl)
	acme.put(tpl.UploadInfo.URL, aep, http.StatusOK)
	c.waitFor("template", tpl.ID, "uploaded")
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
	if strings.Join(tpl.Compositions, ",") != "testcomp1" || strings.Join(tpl.Layers, ",") != "<empty text layer>" {
		t.Fatalf("aep template %+v", tpl)
	}
}

func TestTemplateFromSrc(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	file := templateZip(t, inspection())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/promo.zip" {
			http.NotFound(w, r)
			return
		}
		w.Write(file)
	}))
	defer srv.Close()
	var tpl templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "From src", "src": srv.URL + "/promo.zip"}, http.StatusCreated, &tpl)
	if tpl.Status != "downloading" || tpl.UploadInfo != nil {
		t.Fatalf("template from src %+v", tpl)
	}
	c.waitFor("template", tpl.ID, "uploaded")

	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Missing", "src": srv.URL + "/missing.zip"}, http.StatusCreated, &tpl)
	c.waitFor("template", tpl.ID, "error")
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
	if tpl.Error == nil || !strings.Contains(*tpl.Error, "404") {
		t.Fatalf("error %v", tpl.Error)
	}
}

// TestJobValidation checks each error code a job creation can answer with.
func TestJobValidation(t *testing.T) {
	c := startCoordinator(t, options{slots: 0, config: "\n[jobs]\nmax_nesting_depth = 1\n"})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "KEY", "value": "v"}, http.StatusCreated, nil)
	job := func(mutate func(map[string]any)) map[string]any {
		b := renderJob(tplID)
		mutate(b)
		return b
	}
	cases := []struct {
		name  string
		body  any
		code  string
		field string
	}{
		{"not json", "{", "invalid_json", ""},
		{"empty", "", "invalid_json", ""},
		{"array", "[]", "validation_error", ""},
		{"unknown field", job(func(b map[string]any) { b["colour"] = "red" }), "validation_error", "colour"},
		{"wrong type", job(func(b map[string]any) { b["preview"] = "yes" }), "validation_error", "preview"},
		{"no template", map[string]any{"assets": []any{}}, "validation_error", "template"},
		{"unknown template", renderJob("01ARZ3NDEKTSV4RRFFQ69G5FAV"), "template_not_found", "template.id"},
		{"unknown composition", job(func(b map[string]any) { b["template"].(map[string]any)["composition"] = "nope" }), "composition_not_found", "template.composition"},
		{"unknown layer", renderJob(tplID, map[string]any{"type": "image", "layerName": "Tittle", "src": "https://example.com/a.png"}), "layer_not_found", "assets[0].layerName"},
		{"layer in other composition", renderJob(tplID, map[string]any{"type": "text", "layerName": "Credits", "value": "x"}), "layer_not_found", "assets[0].layerName"},
		{"unknown secret", renderJob(tplID, map[string]any{"type": "image", "layerName": "Photo", "src": "https://example.com/${secret.NOPE}.png"}), "secret_not_found", "assets[0].src"},
		{"asset type", renderJob(tplID, map[string]any{"type": "hologram", "layerName": "Photo"}), "validation_error", "assets[0].type"},
		{"field of another type", renderJob(tplID, map[string]any{"type": "text", "layerName": "Title", "value": "x", "src": "https://example.com/a"}), "validation_error", "assets[0].src"},
		{"missing src", renderJob(tplID, map[string]any{"type": "image", "layerName": "Photo"}), "validation_error", "assets[0].src"},
		{"script on lottie", renderJob(tplID, map[string]any{"type": "script", "src": "https://example.com/a.jsx"}), "validation_error", "assets[0].type"},
		{"preview with settings", job(func(b map[string]any) { b["preview"] = true; b["settings"] = map[string]any{"type": "video"} }), "validation_error", "settings"},
		{"image without frames", job(func(b map[string]any) { b["settings"] = map[string]any{"type": "image"} }), "validation_error", "settings.frames"},
		{"bad frames", job(func(b map[string]any) { b["settings"] = map[string]any{"type": "image", "frames": []int{5, 2}} }), "validation_error", "settings.frames"},
		{"bad codec", job(func(b map[string]any) { b["settings"] = map[string]any{"codec": "gif"} }), "validation_error", "settings.codec"},
		{"engine the template lacks", job(func(b map[string]any) { b["settings"] = map[string]any{"engine": "ae2026"} }), "validation_error", "settings.engine"},
		{"bad tag", job(func(b map[string]any) { b["tags"] = "ok,not ok" }), "validation_error", "tags"},
		{"fractional priority", job(func(b map[string]any) { b["priority"] = 1.5 }), "validation_error", "priority"},
		{"webhook to nowhere", job(func(b map[string]any) { b["webhook"] = map[string]any{"url": "mailto:a@b"} }), "validation_error", "webhook.url"},
		{"reserved webhook header", job(func(b map[string]any) {
			b["webhook"] = map[string]any{"url": "https://example.com", "headers": map[string]string{"X-Webhook-Signature": "forged"}}
		}), "validation_error", "webhook.headers.X-Webhook-Signature"},
		{"upload without bucket", job(func(b map[string]any) {
			b["upload"] = map[string]any{"params": map[string]any{"region": "eu", "accessKeyId": "a", "accessKeySecret": "b"}}
		}), "validation_error", "upload.params.bucket"},
		{"nesting too deep", renderJob(tplID, map[string]any{"type": "job", "layerName": "Photo",
			"template": map[string]any{"id": tplID, "composition": "main"}, "settings": map[string]any{"type": "video"},
			"assets": []any{map[string]any{"type": "job", "layerName": "Logo", "template": map[string]any{"id": tplID, "composition": "main"}, "assets": []any{}}}}),
			"validation_error", "assets[0].assets[0].type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := http.StatusBadRequest
			if tc.code == "template_not_found" {
				status = http.StatusNotFound // a job naming an unknown template (README, The API)
			}
			e := acme.fails(http.MethodPost, "/api/v2/jobs", tc.body, status, tc.code)
			if tc.field != "" && (len(e.Details) == 0 || e.Details[0].Field != tc.field) {
				t.Fatalf("details %+v, want field %q", e.Details, tc.field)
			}
		})
	}
	// Several problems are reported together.
	e := acme.fails(http.MethodPost, "/api/v2/jobs", renderJob(tplID,
		map[string]any{"type": "text", "layerName": "A", "value": "x"}, map[string]any{"type": "text", "layerName": "B", "value": "x"}),
		http.StatusBadRequest, "layer_not_found")
	if len(e.Details) != 2 {
		t.Fatalf("details %+v, want both layers", e.Details)
	}
	// Not errors: a missing font is reported, valid input with every optional field is accepted.
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", job(func(b map[string]any) {
		b["fonts"] = []string{"Brand.ttf"}
		b["priority"] = 7
		b["tags"] = []string{"promo", "q4"}
		b["settings"] = map[string]any{"type": "image", "frames": 12, "codec": "jpeg", "quality": "draft"}
		b["webhook"] = map[string]any{"url": "https://hooks.example.com/${secret.KEY}", "method": "put", "headers": map[string]string{"X-Key": "${secrets.KEY}"}}
		b["upload"] = map[string]any{"prefix": "renders/", "params": map[string]any{"region": "eu-west-1", "bucket": "b", "accessKeyId": "a", "accessKeySecret": "${secret.KEY}"}}
		b["assets"] = []any{
			map[string]any{"type": "function", "name": "nx:layer-remove", "params": map[string]any{"layerName": []string{"Photo", "Logo"}}},
			map[string]any{"type": "data", "layerName": "Title", "property": "Opacity", "value": 50},
			map[string]any{"type": "static", "src": "https://example.com/data.json"},
		}
	}), http.StatusCreated, &cr)
	if strings.Join(cr.MissingFonts, ",") != "Brand.ttf" || !strings.HasPrefix(cr.OutputURL, "https://b.s3.eu-west-1.amazonaws.com/renders/") || !strings.HasSuffix(cr.OutputURL, ".jpg") {
		t.Fatalf("creation %+v", cr)
	}
	j := acme.job(cr.ID)
	if j.Priority != 7 || strings.Join(j.Tags, ",") != "promo,q4" || len(j.Assets) != 4 || j.Assets[0]["params"].(map[string]any)["layerName"] != "Photo" ||
		j.Assets[1]["params"].(map[string]any)["layerName"] != "Logo" {
		t.Fatalf("job %+v: the layerName array must expand in place", j)
	}
	// An id in a path that is not a ULID is a 400; a well-formed unknown one a 404, on every
	// route that takes one.
	for _, path := range []string{"/api/v2/jobs/%s", "/api/v2/jobs/%s/logs", "/api/v2/templates/%s", "/api/v2/batches/%s", "/api/v2/fonts/%s"} {
		e := acme.fails(http.MethodGet, fmt.Sprintf(path, "not-a-ulid"), nil, http.StatusBadRequest, "validation_error")
		if len(e.Details) != 1 || e.Details[0].Field != "id" {
			t.Fatalf("GET %s: details %+v", path, e.Details)
		}
		if status, body, _ := acme.call(http.MethodGet, fmt.Sprintf(path, "01ARZ3NDEKTSV4RRFFQ69G5FAV"), nil); status != http.StatusNotFound {
			t.Fatalf("GET %s of an unknown id: %d %s", path, status, body)
		}
	}
	acme.fails(http.MethodDelete, "/api/v2/secrets/not-a-ulid", nil, http.StatusBadRequest, "validation_error")
	// Only the template is required: a job without assets is created with an empty list, and
	// the answer is 201 as the official client expects.
	var bare created
	acme.must(http.MethodPost, "/api/v2/jobs", map[string]any{"template": map[string]any{"id": tplID, "composition": "main"}}, http.StatusCreated, &bare)
	if j := acme.job(bare.ID); j.Assets == nil || len(j.Assets) != 0 || j.Status != "queued" {
		t.Fatalf("a job without assets: %+v", j)
	}
	// Its log is plain text a browser will not sniff, named for the job.
	status, logText, header := acme.call(http.MethodGet, "/api/v2/jobs/"+bare.ID+"/logs", nil)
	if status != http.StatusOK || !strings.Contains(string(logText), "created as queued") || header.Get("X-Content-Type-Options") != "nosniff" ||
		header.Get("Content-Disposition") != `inline; filename="`+bare.ID+`.log"` {
		t.Fatalf("log: %d %q %v", status, logText, header)
	}
	// Bodies over the limit are refused before they are read.
	big := `{"assets": [], "pad": "` + strings.Repeat("x", 17<<20) + `"}`
	acme.fails(http.MethodPost, "/api/v2/jobs", big, http.StatusRequestEntityTooLarge, "payload_too_large")
}

func TestAuthAndTeamIsolation(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme, rival := c.team("acme"), c.team("rival")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
	var batch struct {
		BatchID string `json:"batchId"`
	}
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{renderJob(tplID)}}, http.StatusCreated, &batch)
	var secret struct {
		ID string `json:"id"`
	}
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "S", "value": "v"}, http.StatusCreated, &secret)

	anonymous := &client{c: c}
	anonymous.fails(http.MethodGet, "/api/v2/jobs", nil, http.StatusUnauthorized, "unauthorized")
	(&client{c: c, token: "ff_unknown"}).fails(http.MethodGet, "/api/v2/jobs", nil, http.StatusUnauthorized, "unauthorized")
	acme.fails(http.MethodGet, "/api/v2/nodes", nil, http.StatusForbidden, "forbidden")
	acme.fails(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "x"}, http.StatusForbidden, "forbidden")
	(&client{c: c, token: "ff_unknown"}).fails(http.MethodGet, "/api/v2/nodes", nil, http.StatusUnauthorized, "unauthorized")

	for _, path := range []string{"/api/v2/jobs/" + cr.ID, "/api/v2/jobs/" + cr.ID + "/logs", "/api/v2/batches/" + batch.BatchID} {
		rival.fails(http.MethodGet, path, nil, http.StatusNotFound, "not_found")
	}
	rival.fails(http.MethodGet, "/api/v2/templates/"+tplID, nil, http.StatusNotFound, "template_not_found")
	rival.fails(http.MethodDelete, "/api/v2/secrets/"+secret.ID, nil, http.StatusNotFound, "not_found")
	rival.fails(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusNotFound, "template_not_found")
	var list []job
	h := rival.must(http.MethodGet, "/api/v2/jobs", nil, http.StatusOK, &list)
	if len(list) != 0 || h.Get("X-Total-Count") != "0" {
		t.Fatalf("rival sees %d jobs", len(list))
	}
	var templates []templateAnswer
	rival.must(http.MethodGet, "/api/v2/templates", nil, http.StatusOK, &templates)
	if len(templates) != 0 {
		t.Fatal("rival sees acme's templates")
	}
	var nodes []map[string]any
	(&client{c: c, token: adminToken}).must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, &nodes)

	// The OpenAPI document is public and describes the API.
	var doc map[string]any
	anonymous.must(http.MethodGet, "/api/v2/openapi.json", nil, http.StatusOK, &doc)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", doc["openapi"])
	}
	anonymous.fails(http.MethodGet, "/api/v3/jobs", nil, http.StatusNotFound, "not_found")
}

func TestRateLimit(t *testing.T) {
	c := startCoordinator(t, options{slots: 0, rateLimit: "requests_per_second = 0.001\nburst = 3"})
	acme := c.team("acme")
	for range 3 {
		acme.must(http.MethodGet, "/api/v2/jobs", nil, http.StatusOK, nil)
	}
	status, body, header := acme.call(http.MethodGet, "/api/v2/jobs", nil)
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), "rate_limited") {
		t.Fatalf("status %d: %s", status, body)
	}
	if s, err := strconv.Atoi(header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q", header.Get("Retry-After"))
	}
	// Another team's token has its own budget.
	c.team("other").must(http.MethodGet, "/api/v2/jobs", nil, http.StatusOK, nil)
}

func TestFontsAndSecrets(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	font, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatal("fonts-dejavu-core is not installed (make setup installs it): ", err)
	}
	var f struct {
		ID         string `json:"id"`
		FamilyName string `json:"familyName"`
		FileName   string `json:"fileName"`
		CreatedAt  string `json:"createdAt"`
	}
	status, body := acme.uploadFont("Brand.ttf", font, "")
	if status != http.StatusCreated || json.Unmarshal(body, &f) != nil || f.FamilyName != "DejaVu Sans" || f.FileName != "Brand.ttf" || f.CreatedAt == "" {
		t.Fatalf("upload: %d %s", status, body)
	}
	if status, body := acme.uploadFont("Brand.ttf", font, ""); status != http.StatusConflict {
		t.Fatalf("duplicate: %d %s", status, body)
	}
	if status, body := acme.uploadFont("Other.ttf", font, "Corporate"); status != http.StatusCreated || !strings.Contains(string(body), `"familyName":"Corporate"`) {
		t.Fatalf("named upload: %d %s", status, body)
	}
	if status, body := acme.uploadFont("fake.ttf", []byte("PK\x03\x04 not a font at all"), ""); status != http.StatusBadRequest || !strings.Contains(string(body), "TrueType") {
		t.Fatalf("fake font: %d %s", status, body)
	}
	var fonts []map[string]any
	acme.must(http.MethodGet, "/api/v2/fonts", nil, http.StatusOK, &fonts)
	acme.must(http.MethodGet, "/api/v2/fonts/"+f.ID, nil, http.StatusOK, nil)
	if len(fonts) != 2 {
		t.Fatalf("fonts %v", fonts)
	}
	c.team("rival").fails(http.MethodGet, "/api/v2/fonts/"+f.ID, nil, http.StatusNotFound, "font_not_found")

	// A job naming the font gets it staged for its render.
	tplID := acme.uploadTemplate(inspection())
	b := renderJob(tplID)
	b["fonts"] = []string{"Brand.ttf", "Missing.ttf"}
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
	if strings.Join(cr.MissingFonts, ",") != "Missing.ttf" {
		t.Fatalf("missing fonts %v", cr.MissingFonts)
	}
	c.waitJob(cr.ID, "finished")
	_, out := get(t, acme.job(cr.ID).OutputURL)
	var rendered renderCall
	json.Unmarshal(out, &rendered)
	if len(rendered.Fonts) != 1 || rendered.Fonts[0].Name != "Brand.ttf" || rendered.Fonts[0].SHA256 != sha(font) {
		t.Fatalf("fonts at the renderer %+v", rendered.Fonts)
	}
	if status, _, _ := acme.call(http.MethodDelete, "/api/v2/fonts/"+f.ID, nil); status != http.StatusNoContent {
		t.Fatalf("delete font: %d", status)
	}

	// Secrets: stored, listed by name, never shown, unique by name.
	var s struct {
		ID, Name, CreatedAt string
	}
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "S3_KEY", "value": "hunter2"}, http.StatusCreated, &s)
	acme.fails(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "S3_KEY", "value": "other"}, http.StatusConflict, "conflict")
	acme.fails(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "bad name", "value": "x"}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "NOVALUE"}, http.StatusBadRequest, "validation_error")
	_, listed, _ := acme.call(http.MethodGet, "/api/v2/secrets", nil)
	if strings.Contains(string(listed), "hunter2") || !strings.Contains(string(listed), "S3_KEY") {
		t.Fatalf("secret list %s", listed)
	}
	var deleted struct{ ID, Name string }
	acme.must(http.MethodDelete, "/api/v2/secrets/"+s.ID, nil, http.StatusOK, &deleted)
	if deleted.ID != s.ID || deleted.Name != "S3_KEY" {
		t.Fatalf("delete secret answered %+v", deleted)
	}
	acme.fails(http.MethodDelete, "/api/v2/secrets/"+s.ID, nil, http.StatusNotFound, "not_found")
	if strings.Contains(c.stderr.String(), "hunter2") || strings.Contains(c.stderr.String(), acme.token) {
		t.Fatal("a secret value or a token reached the log")
	}
}

// TestMissingFontsListTheTemplatesFonts: the template's own fonts that neither the job nor the
// library provides are in missingFonts, at creation and on GET; a library font provides its
// PostScript name (read from the file: After Effects projects name fonts so) and its family.
func TestMissingFontsListTheTemplatesFonts(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	in := inspection()
	in.Fonts = []string{"DejaVuSans", "DejaVu Sans", "Brand Display"}
	tplID := acme.uploadTemplate(in)
	missing := func(want string) {
		t.Helper()
		var cr created
		acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
		if got := strings.Join(cr.MissingFonts, ","); got != want {
			t.Fatalf("created: missing fonts %q, want %q", got, want)
		}
		if got := strings.Join(acme.job(cr.ID).MissingFonts, ","); got != want {
			t.Fatalf("GET: missing fonts %q, want %q", got, want)
		}
	}
	missing("DejaVuSans,DejaVu Sans,Brand Display")
	ttf, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatal("fonts-dejavu-core is not installed (make setup installs it): ", err)
	}
	if status, body := acme.uploadFont("house.ttf", ttf, ""); status != http.StatusCreated {
		t.Fatalf("font upload: %d %s", status, body)
	}
	missing("Brand Display")
	if status, body := acme.uploadFont("Brand-Display.ttf", ttf, "Brand"); status != http.StatusCreated {
		t.Fatalf("font upload: %d %s", status, body)
	}
	missing("")
}

// TestASmallTemplateIsInspectedWhenItsUploadAnswers: a client that polls right after its PUT
// sees the end of the inspection, uploaded or error with the reason.
func TestASmallTemplateIsInspectedWhenItsUploadAnswers(t *testing.T) {
	c := startCoordinator(t, options{})
	acme := c.team("acme")
	for _, tc := range []struct {
		file        []byte
		status, why string
	}{
		{templateZip(t, inspection()), "uploaded", ""},
		{[]byte("not a template at all"), "error", "neither an After Effects project"},
	} {
		var tpl templateAnswer
		acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Polled"}, http.StatusCreated, &tpl)
		acme.put(tpl.UploadInfo.URL, tc.file, http.StatusOK)
		acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
		if tpl.Status != tc.status || (tc.why != "" && (tpl.Error == nil || !strings.Contains(*tpl.Error, tc.why))) {
			t.Fatalf("right after the upload: %s, error %q; want %s", tpl.Status, stringOf(tpl.Error), tc.status)
		}
	}
}

func (cl *client) uploadFont(name string, data []byte, family string) (int, []byte) {
	cl.c.t.Helper()
	var body bytes.Buffer
	boundary := "framefarmtestboundary"
	body.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"font\"; filename=\"" + name + "\"\r\nContent-Type: font/ttf\r\n\r\n")
	body.Write(data)
	body.WriteString("\r\n")
	if family != "" {
		body.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"familyName\"\r\n\r\n" + family + "\r\n")
	}
	body.WriteString("--" + boundary + "--\r\n")
	req, _ := http.NewRequest(http.MethodPost, cl.c.url+"/api/v2/fonts", &body)
	req.Header.Set("Authorization", "Bearer "+cl.token)
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cl.c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// TestAnswersArriveWholeWhateverTheRouteReadOfTheBody: a route that answers without reading a
// large body (an unknown template, a bad token) still reads it before answering, so a client
// still sending gets the answer, never a reset connection.
func TestAnswersArriveWholeWhateverTheRouteReadOfTheBody(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	body := `{"displayName": "` + strings.Repeat("x", 2<<20) + `"}`
	for i := range 20 {
		e := acme.fails(http.MethodPatch, "/api/v2/templates/01ARZ3NDEKTSV4RRFFQ69G5FAV", body, http.StatusNotFound, "template_not_found")
		if e.Error == "" {
			t.Fatalf("round %d: an empty error", i)
		}
		(&client{c: c, token: "wrong"}).fails(http.MethodPost, "/api/v2/jobs", body, http.StatusUnauthorized, "unauthorized")
	}
}

// TestIdempotencyKeyMakesRetriesSafe: a creation sent again with its Idempotency-Key (even at
// the same moment) gets the first answer and creates nothing more; the key with another body is
// a 409.
func TestIdempotencyKeyMakesRetriesSafe(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	post := func(path, key string, body any) (int, []byte, http.Header) {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, c.url+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+acme.token)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out, resp.Header
	}
	count := func() string {
		_, _, h := acme.call(http.MethodGet, "/api/v2/jobs?limit=1", nil)
		return h.Get("X-Total-Count")
	}
	status, first, _ := post("/api/v2/jobs", "order-1", renderJob(tplID))
	again, second, h := post("/api/v2/jobs", "order-1", renderJob(tplID))
	if status != http.StatusCreated || again != http.StatusCreated || !bytes.Equal(first, second) || h.Get("Idempotent-Replayed") != "true" || count() != "1" {
		t.Fatalf("retry: %d %s, then %d %s (%v); %s jobs", status, first, again, second, h, count())
	}
	if status, body, _ := post("/api/v2/jobs", "order-1", renderJob(tplID, map[string]any{"type": "text", "layerName": "Title", "value": "other"})); status != http.StatusConflict {
		t.Fatalf("the key with another body: %d %s", status, body)
	}
	// Sent ten times at once: one batch, one answer.
	batch := map[string]any{"jobs": []any{renderJob(tplID), renderJob(tplID)}}
	answers := make(chan string, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, _ := post("/api/v2/batches", "campaign-7", batch)
			answers <- fmt.Sprint(status, " ", string(body))
		}()
	}
	wg.Wait()
	close(answers)
	var seen []string
	for a := range answers {
		seen = append(seen, a)
	}
	distinct := slices.Compact(slices.Sorted(slices.Values(seen)))
	if len(distinct) != 1 || !strings.HasPrefix(distinct[0], "201 ") || count() != "3" {
		t.Fatalf("ten identical batches: %d different answers, %s jobs:\n%s", len(distinct), count(), strings.Join(distinct, "\n"))
	}
	if status, _, _ := post("/api/v2/jobs", strings.Repeat("k", 300), renderJob(tplID)); status != http.StatusBadRequest {
		t.Fatalf("a 300-character key: %d", status)
	}
}

func stringOf(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
