package main

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestWhatANewUserMeets: what a new user sent and was answered badly, each answered clearly: a
// route of the API without its prefix names the route meant; a body with a byte-order mark
// (Windows PowerShell 5.1 writes one) is read; a body of the wrong shape says so; a batch with no
// body names no batch; a method a route does not take says which it does; a Lottie animation as
// Bodymovin exports it is a template; an unknown field of settings says what sets it.
func TestWhatANewUserMeets(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	e := acme.fails(http.MethodGet, "/v3/templates", nil, http.StatusNotFound, "not_found")
	if !strings.Contains(e.Error, "this route is GET /api/v3/templates") {
		t.Errorf("/v3/templates: %s", e.Error)
	}
	if e := acme.fails(http.MethodGet, "/api/jobs", nil, http.StatusNotFound, "not_found"); !strings.Contains(e.Error, "GET /api/v2/jobs") {
		t.Errorf("/api/jobs: %s", e.Error)
	}
	var tpl struct {
		ID         string `json:"id"`
		UploadInfo struct {
			URL string `json:"url"`
		} `json:"uploadInfo"`
	}
	acme.must(http.MethodPost, "/api/v2/templates", "\ufeff"+`{"type": "json", "displayName": "From PowerShell"}`, http.StatusCreated, &tpl)
	if e := acme.fails(http.MethodPost, "/api/v2/templates", `[]`, http.StatusBadRequest, "validation_error"); e.Error != "the body must be an object, not array" {
		t.Errorf("[] as a body: %q", e.Error)
	}
	status, body, _ := acme.call(http.MethodPost, "/api/v2/batches", nil)
	if status != http.StatusBadRequest || strings.Contains(string(body), "batchId") {
		t.Errorf("a batch with no body: %d %s", status, body)
	}
	if e := acme.fails(http.MethodPost, "/api/v2/secrets", map[string]string{"name": "K", "value": "v"}, http.StatusMethodNotAllowed, "method_not_allowed"); !strings.Contains(e.Error, "PUT") {
		t.Errorf("POST /secrets: %s", e.Error)
	}
	lottie, err := os.ReadFile("../../renderer/testdata/fixtures/lottie/CenteredText.json")
	if err != nil {
		t.Fatal(err)
	}
	acme.put(tpl.UploadInfo.URL, lottie, http.StatusOK)
	c.waitFor("template", tpl.ID, "uploaded", "error")
	var uploaded struct {
		Status       string   `json:"status"`
		Compositions []string `json:"compositions"`
		Error        *string  `json:"error"`
	}
	acme.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &uploaded)
	if uploaded.Status != "uploaded" || !slices.Equal(uploaded.Compositions, []string{"Text"}) {
		t.Fatalf("a Bodymovin export as a template: %+v", uploaded)
	}
	job := renderJob(tpl.ID)
	job["template"] = map[string]any{"id": tpl.ID, "composition": "Text"}
	job["settings"] = map[string]any{"format": "mp4"}
	if e := acme.fails(http.MethodPost, "/api/v2/jobs", job, http.StatusBadRequest, "validation_error"); !strings.Contains(e.Error, "settings.codec") {
		t.Errorf("settings.format: %s", e.Error)
	}
}

// TestAMissingFontIsLoud: a font a template uses that the farm has no file of shows on the
// template, on the job and in the job's log; one the render node has installed on its system is
// not missing from the job.
func TestAMissingFontIsLoud(t *testing.T) {
	c := startCoordinator(t, options{slots: 1}) // its render node has the system's fonts (DejaVu)
	acme := c.team("acme")
	in := inspection()
	in.Fonts = []string{"Helvetica Nowhere", "DejaVu Sans"}
	tplID := acme.uploadTemplate(in)
	var tpl struct {
		MissingFonts []string `json:"missingFonts"`
	}
	acme.must(http.MethodGet, "/api/v2/templates/"+tplID, nil, http.StatusOK, &tpl)
	if !slices.Equal(tpl.MissingFonts, []string{"Helvetica Nowhere", "DejaVu Sans"}) {
		t.Fatalf("the template's missing fonts: %v", tpl.MissingFonts)
	}
	var made created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &made)
	if !slices.Equal(made.MissingFonts, []string{"Helvetica Nowhere"}) {
		t.Fatalf("the job's missing fonts: %v (DejaVu Sans is installed on the node)", made.MissingFonts)
	}
	if log := acme.logs(made.ID); !strings.Contains(log, "fonts the farm has none of, which the render replaces with others: Helvetica Nowhere") {
		t.Fatalf("the job's log:\n%s", log)
	}
	var view job
	raw, _ := json.Marshal(acme.job(made.ID))
	json.Unmarshal(raw, &view)
	if !slices.Equal(view.MissingFonts, []string{"Helvetica Nowhere"}) {
		t.Fatalf("the job's view: missing fonts %v", view.MissingFonts)
	}
}

// TestAChunkHoldingALimitIsNamedByItsJob: the admin's list of limits names the renders holding
// each as their client knows them: a split job's chunk by its job and its index.
func TestAChunkHoldingALimitIsNamedByItsJob(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	admin := &client{c: c, token: adminToken}
	acme := c.team("acme")
	c.admin("limit", "set", "lic", "1")
	j := splitJob(acme.uploadTemplate(inspection()), 50)
	j["limits"], j["name"] = []string{"lic"}, "Spot (split)"
	var made created
	acme.must(http.MethodPost, "/api/v2/jobs", j, http.StatusCreated, &made)
	call := c.control.next(t)
	var limits []struct {
		HeldBy []struct {
			Job   string `json:"job"`
			Chunk *int   `json:"chunk"`
			Name  string `json:"name"`
		} `json:"heldBy"`
	}
	admin.must(http.MethodGet, "/api/v2/admin/limits", nil, http.StatusOK, &limits)
	if len(limits) != 1 || len(limits[0].HeldBy) != 1 || limits[0].HeldBy[0].Job != made.ID || limits[0].HeldBy[0].Chunk == nil ||
		*limits[0].HeldBy[0].Chunk != 0 || limits[0].HeldBy[0].Name != "Spot (split)" {
		t.Fatalf("the limit's holders: %+v", limits)
	}
	if list := c.admin("limit", "list"); !strings.Contains(list, made.ID+` (chunk 0) "Spot (split)"`) {
		t.Fatalf("limit list:\n%s", list)
	}
	call.answer(renderReply{Result: "finish"})
}
