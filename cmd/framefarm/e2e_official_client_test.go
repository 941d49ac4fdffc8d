package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/renderer/framediff"
)

// The shapes below are those the official nexrender CLI decodes answers into (its generated
// client): a field of another JSON type fails its decoding, so the tests decode into them.
type (
	cliTemplateV3 struct {
		ID          string    `json:"id"`
		Type        string    `json:"type"`
		DisplayName string    `json:"displayName"`
		Status      string    `json:"status"`
		CreatedAt   time.Time `json:"createdAt"`
		UpdatedAt   time.Time `json:"updatedAt"`
	}
	cliComposition struct {
		AEID      string         `json:"aeid"`
		Name      string         `json:"name"`
		Width     float32        `json:"width"`
		Height    float32        `json:"height"`
		Duration  float32        `json:"duration"`
		FrameRate float32        `json:"frame_rate"`
		Data      map[string]any `json:"data"`
	}
	cliLayer struct {
		AEID          int            `json:"aeid"`
		CompositionID int            `json:"composition_id"`
		Name          string         `json:"name"`
		Top           float32        `json:"top"`
		Left          float32        `json:"left"`
		Width         float32        `json:"width"`
		Height        float32        `json:"height"`
		StartTime     float32        `json:"start_time"`
		InPoint       float32        `json:"in_point"`
		OutPoint      float32        `json:"out_point"`
		LayerType     string         `json:"layer_type"`
		SourceType    *string        `json:"source_type"`
		SourceCompID  *int           `json:"source_comp_id"`
		ParentID      *int           `json:"parent_id"`
		Data          map[string]any `json:"data"`
	}
)

// nestedTemplate is the Lottie test template whose text layer Title sits in Main -> Scene -> Card.
func nestedTemplate(t *testing.T) []byte {
	t.Helper()
	return fixtureZip(t, filepath.Join("..", "nested"))
}

// TestOfficialClientTemplateCommands walks the official CLI's template commands the way it calls
// them: upload (v2 create, PUT to the upload URL, wait on v3), list, show, compositions, layers
// (matched to compositions by aeid), download without -o, rename, delete; and its job diagnose
// reads of the v3 routes.
func TestOfficialClientTemplateCommands(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme, other := c.team("acme"), c.team("other")

	// template upload
	var created struct {
		ID         string `json:"id"`
		UploadInfo struct {
			URL    string `json:"url"`
			Method string `json:"method"`
		} `json:"uploadInfo"`
	}
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"displayName": "Nested", "type": "zip"}, http.StatusCreated, &created)
	var waiting cliTemplateV3
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID, nil, http.StatusOK, &waiting)
	if waiting.Status != "awaiting_upload" || waiting.Type != "zip" || waiting.DisplayName != "Nested" || waiting.CreatedAt.IsZero() {
		t.Fatalf("template before its upload %+v", waiting)
	}
	acme.fails(http.MethodGet, "/api/v3/templates/"+created.ID+"/layers", nil, http.StatusConflict, "template_not_ready")
	acme.put(created.UploadInfo.URL, nestedTemplate(t), http.StatusOK)
	c.waitFor("template", created.ID, "uploaded")

	// template list, show
	var list []cliTemplateV3
	acme.must(http.MethodGet, "/api/v3/templates", nil, http.StatusOK, &list)
	if len(list) != 1 || list[0].ID != created.ID || list[0].Status != "uploaded" {
		t.Fatalf("list %+v", list)
	}
	other.must(http.MethodGet, "/api/v3/templates", nil, http.StatusOK, &list)
	if len(list) != 0 {
		t.Fatalf("another team sees %+v", list)
	}

	// template compositions: defaults, paging, the cap at 1000, bad values.
	var comps []cliComposition
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID+"/compositions?limit=300&offset=0", nil, http.StatusOK, &comps)
	names := map[string]string{}
	for _, cp := range comps {
		names[cp.AEID] = cp.Name
	}
	if len(comps) != 4 || names["1"] != "Main" || names["3"] != "Card" || comps[2].Width != 200 || comps[2].FrameRate != 25 ||
		comps[2].Duration != 1 || comps[2].Data["refId"] != "comp_card" {
		t.Fatalf("compositions %+v", comps)
	}
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID+"/compositions?limit=1&offset=1", nil, http.StatusOK, &comps)
	if len(comps) != 1 || comps[0].Name != "Scene" {
		t.Fatalf("second page %+v", comps)
	}
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID+"/compositions?limit=5000", nil, http.StatusOK, &comps)
	if len(comps) != 4 {
		t.Fatalf("limit 5000: %d compositions", len(comps))
	}
	for _, q := range []string{"limit=0", "limit=x", "offset=-1", "offset=1.5"} {
		acme.fails(http.MethodGet, "/api/v3/templates/"+created.ID+"/compositions?"+q, nil, http.StatusBadRequest, "validation_error")
	}

	// template layers, each named with its composition as the CLI does.
	var layers []cliLayer
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID+"/layers", nil, http.StatusOK, &layers)
	byPlace := map[string]cliLayer{}
	for _, l := range layers {
		byPlace[names[fmt.Sprint(l.CompositionID)]+"/"+l.Name] = l
	}
	if len(layers) != 6 || len(byPlace) != 6 {
		t.Fatalf("layers %+v", layers)
	}
	card := byPlace["Scene/Card"]
	if card.SourceCompID == nil || *card.SourceCompID != 3 || card.SourceType == nil || *card.SourceType != "composition" ||
		card.Left != 110 || card.Top != 65 || card.Width != 100 || card.Height != 50 || card.OutPoint != 1 || card.LayerType != "precomp" {
		t.Fatalf("the Card precomp layer %+v", card)
	}
	// A text layer's box, which the CLI prints as its size: its lines at its size, the glyph
	// widths estimated where the export carries none (and said so).
	if title := byPlace["Card/Title"]; title.LayerType != "text" || title.Data["text"] != "Hello" || title.SourceType != nil || title.AEID != 1 ||
		title.Width <= 0 || title.Height <= 0 || title.Data["boundsEstimated"] != true {
		t.Fatalf("the Title text layer %+v", title)
	}
	if _, ok := byPlace["Other/Title"]; !ok {
		t.Fatalf("layers %v", byPlace)
	}
	// Every layer's box is numbers, as the interface's schema has them.
	if _, raw, _ := acme.call(http.MethodGet, "/api/v3/templates/"+created.ID+"/layers", nil); strings.Contains(string(raw), `null,"left"`) || strings.Contains(string(raw), `"top":null`) {
		t.Fatalf("a layer without numbers for its box: %s", raw)
	}
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID+"/layers?limit=2&offset=4", nil, http.StatusOK, &layers)
	if len(layers) != 2 || layers[0].Name != "Panel" || layers[1].Name != "Title" || layers[1].CompositionID != 4 {
		t.Fatalf("last page %+v", layers)
	}

	// template download without -o: the v3 template names the file, the v2 route gives the URL.
	var shown cliTemplateV3
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID, nil, http.StatusOK, &shown)
	var download struct {
		URL string `json:"url"`
	}
	acme.must(http.MethodGet, "/api/v2/templates/"+created.ID+"/download", nil, http.StatusOK, &download)
	if status, data := get(t, download.URL); status != http.StatusOK || !bytes.Equal(data, nestedTemplate(t)) || shown.Type != "zip" {
		t.Fatalf("download: %d, %d bytes, type %q", status, len(data), shown.Type)
	}

	// Ids: malformed is 400, unknown or another team's is 404, no token is 401.
	for _, path := range []string{"", "/compositions", "/layers"} {
		acme.fails(http.MethodGet, "/api/v3/templates/not-an-id"+path, nil, http.StatusBadRequest, "validation_error")
		acme.fails(http.MethodGet, "/api/v3/templates/01JA0000000000000000000000"+path, nil, http.StatusNotFound, "template_not_found")
		other.fails(http.MethodGet, "/api/v3/templates/"+created.ID+path, nil, http.StatusNotFound, "template_not_found")
		(&client{c: c}).fails(http.MethodGet, "/api/v3/templates/"+created.ID+path, nil, http.StatusUnauthorized, "unauthorized")
	}

	// template rename, delete
	var renamed cliTemplateV3
	acme.must(http.MethodPatch, "/api/v2/templates/"+created.ID, map[string]string{"displayName": "Nested v2"}, http.StatusOK, nil)
	acme.must(http.MethodGet, "/api/v3/templates/"+created.ID, nil, http.StatusOK, &renamed)
	if renamed.DisplayName != "Nested v2" || !renamed.UpdatedAt.After(renamed.CreatedAt) && !renamed.UpdatedAt.Equal(renamed.CreatedAt) {
		t.Fatalf("renamed %+v", renamed)
	}
	acme.must(http.MethodDelete, "/api/v2/templates/"+created.ID, nil, http.StatusNoContent, nil)
	acme.fails(http.MethodGet, "/api/v3/templates/"+created.ID, nil, http.StatusNotFound, "template_not_found")
}

// TestLayersTwoCompositionsDeepRenderWithLottie: a job without a composition on its asset
// changes the text layer two compositions below the rendered one, as nexrender users expect;
// paths and "*" work; a name found nowhere says where it was looked for.
func TestLayersTwoCompositionsDeepRenderWithLottie(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, realEngines: true})
	acme := c.team("acme")
	tpl := acme.uploadTemplateFile("zip", nestedTemplate(t))
	still := func(assets ...map[string]any) map[string]any {
		if assets == nil {
			assets = []map[string]any{}
		}
		return map[string]any{"template": map[string]any{"id": tpl.ID, "composition": "Main"}, "assets": assets,
			"settings": map[string]any{"type": "image", "frames": 0}}
	}
	title := func(composition string) map[string]any {
		a := map[string]any{"type": "text", "layerName": "Title", "value": "WWWWWWWW"}
		if composition != "" {
			a["composition"] = composition
		}
		return a
	}
	decode := func(data []byte) *bytes.Reader { return bytes.NewReader(data) }
	_, plain := acme.render(still())
	base, err := png.Decode(decode(plain))
	if err != nil {
		t.Fatal(err)
	}
	for _, composition := range []string{"", "Main->Scene->Card", "*"} {
		_, out := acme.render(still(title(composition)))
		img, err := png.Decode(decode(out))
		if err != nil {
			t.Fatal(err)
		}
		if d := framediff.Mean(base, img, base.Bounds()); d < 0.2 {
			t.Errorf("composition %q: the text two compositions deep did not change (mean difference %.3f)", composition, d)
		}
	}
	e := acme.fails(http.MethodPost, "/api/v2/jobs", still(map[string]any{"type": "text", "layerName": "Nobody", "value": "x"}), http.StatusBadRequest, "layer_not_found")
	if !strings.Contains(e.Error, `"Main", "Scene", "Card"`) {
		t.Errorf("a name found nowhere: %s", e.Error)
	}
	acme.fails(http.MethodPost, "/api/v2/jobs", still(title("Main->Other")), http.StatusBadRequest, "composition_not_found")
}

// More of the official client's shapes, for its job, batch, font and secret commands.
type (
	cliJob struct {
		ID         *string  `json:"id"`
		OutputURL  *string  `json:"outputUrl"`
		Progress   *float32 `json:"progress"`
		Status     *string  `json:"status"`
		TemplateID *string  `json:"templateId"`
		Stats      *struct {
			CreatedAt      *time.Time `json:"createdAt"`
			Error          *string    `json:"error"`
			ErrorAt        *time.Time `json:"errorAt"`
			FinishedAt     *time.Time `json:"finishedAt"`
			RenderDuration *float32   `json:"renderDuration"`
			StartedAt      *time.Time `json:"startedAt"`
			TotalAssets    *int       `json:"totalAssets"`
			UpdatedAt      *time.Time `json:"updatedAt"`
		} `json:"stats"`
	}
	cliJobCreated struct {
		Children *[]struct {
			ID           string    `json:"id"`
			MissingFonts *[]string `json:"missingFonts"`
			OutputURL    string    `json:"outputUrl"`
			Status       *string   `json:"status"`
		} `json:"children"`
		ID           string    `json:"id"`
		MissingFonts *[]string `json:"missingFonts"`
		OutputURL    string    `json:"outputUrl"`
		Status       string    `json:"status"`
	}
	cliBatchCreated struct {
		BatchID string `json:"batchId"`
		Errors  *[]struct {
			Error     *string `json:"error"`
			ErrorCode *string `json:"errorCode"`
			Index     *int    `json:"index"`
		} `json:"errors"`
		Jobs []struct {
			ID        *string `json:"id"`
			Index     *int    `json:"index"`
			OutputURL *string `json:"outputUrl"`
			Status    *string `json:"status"`
		} `json:"jobs"`
		Status       string `json:"status"`
		SuccessCount int    `json:"successCount"`
		TotalJobs    int    `json:"totalJobs"`
	}
	cliBatchStatus struct {
		BatchID string `json:"batchId"`
		Jobs    []struct {
			ID     *string `json:"id"`
			Index  *int    `json:"index"`
			Status *string `json:"status"`
			Stats  *struct {
				CreatedAt  *time.Time `json:"createdAt"`
				FinishedAt *time.Time `json:"finishedAt"`
			} `json:"stats"`
		} `json:"jobs"`
		Stats struct {
			Error    *int `json:"error"`
			Finished *int `json:"finished"`
			Pending  *int `json:"pending"`
			Total    *int `json:"total"`
		} `json:"stats"`
		Status string `json:"status"`
	}
	cliBatchCancelled struct {
		BatchID        string   `json:"batchId"`
		CancelledCount int      `json:"cancelledCount"`
		CancelledJobs  []cliJob `json:"cancelledJobs"`
		Jobs           []struct {
			ID     string  `json:"id"`
			Index  int     `json:"index"`
			Reason *string `json:"reason"`
			Result string  `json:"result"`
			Status string  `json:"status"`
		} `json:"jobs"`
		SkippedCount int    `json:"skippedCount"`
		Status       string `json:"status"`
		TotalJobs    int    `json:"totalJobs"`
	}
	cliFont struct {
		CreatedAt  *time.Time `json:"createdAt"`
		FamilyName *string    `json:"familyName"`
		FileName   *string    `json:"fileName"`
		ID         *string    `json:"id"`
	}
	cliSecret struct {
		CreatedAt time.Time `json:"createdAt"`
		ID        string    `json:"id"`
		Name      string    `json:"name"`
	}
)

// TestOfficialClientJobBatchFontSecretCommands walks the CLI's other commands through the routes
// and status codes they check, decoding each answer into the client's types.
func TestOfficialClientJobBatchFontSecretCommands(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())

	// auth status / login verify the token with one minimal job.
	var jobs []cliJob
	acme.must(http.MethodGet, "/api/v2/jobs?limit=1&minimal=true", nil, http.StatusOK, &jobs)

	// job submit, then job wait until it finishes.
	body := renderJob(tplID)
	body["fonts"] = []string{"Missing.ttf"}
	var submitted cliJobCreated
	acme.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &submitted)
	if submitted.Status != "queued" || submitted.OutputURL == "" || submitted.MissingFonts == nil || (*submitted.MissingFonts)[0] != "Missing.ttf" {
		t.Fatalf("submitted %+v", submitted)
	}
	c.control.answerAll(finishAll)
	c.waitJob(submitted.ID, "finished")
	var shown cliJob
	acme.must(http.MethodGet, "/api/v2/jobs/"+submitted.ID, nil, http.StatusOK, &shown)
	if *shown.Status != "finished" || *shown.Progress != 100 || shown.Stats.FinishedAt == nil || *shown.TemplateID != tplID {
		t.Fatalf("job %+v", shown)
	}
	// job logs: any 2xx body is printed.
	if status, logs, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+submitted.ID+"/logs", nil); status != http.StatusOK || len(logs) == 0 {
		t.Fatalf("logs: %d", status)
	}
	// job list with the flags the CLI sends (dates as its client formats time.Time).
	from := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano))
	to := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	for _, q := range []string{"from=0&limit=50&minimal=true&sort=newest_first",
		"from=0&limit=50&minimal=false&sort=oldest_first&states=finished&tags=a&from_date=" + from + "&to_date=" + to} {
		acme.must(http.MethodGet, "/api/v2/jobs?"+q, nil, http.StatusOK, &jobs)
	}

	// job cancel and cancel-many answer the jobs cancelled; a held render keeps them queued.
	c.control.answerAll(nil)
	var blocker, a, b cliJobCreated
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &blocker)
	c.waitJob(blocker.ID, "render:dorender")
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &a)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &b)
	var cancelled []cliJob
	acme.must(http.MethodPatch, "/api/v2/jobs/"+a.ID+"/cancel", nil, http.StatusOK, &cancelled)
	if len(cancelled) != 1 || *cancelled[0].Status != "manually_cancelled" {
		t.Fatalf("cancel %+v", cancelled)
	}
	acme.must(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": []string{b.ID}}, http.StatusOK, &cancelled)
	if len(cancelled) != 1 || *cancelled[0].ID != b.ID {
		t.Fatalf("cancel-many %+v", cancelled)
	}

	// job join of two rendered jobs.
	child := map[string]any{"type": "job", "template": map[string]any{"id": tplID, "composition": "main"}}
	var joined cliJobCreated
	acme.must(http.MethodPost, "/api/v2/jobs/join", map[string]any{"assets": []any{child, child}}, http.StatusCreated, &joined)
	if joined.Status != "pending" || joined.Children == nil || len(*joined.Children) != 2 {
		t.Fatalf("join %+v", joined)
	}

	// batch create, show, cancel.
	var batch cliBatchCreated
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{renderJob(tplID), renderJob(tplID)}}, http.StatusCreated, &batch)
	if batch.Status != "created" || batch.SuccessCount != 2 || len(batch.Jobs) != 2 {
		t.Fatalf("batch %+v", batch)
	}
	var status cliBatchStatus
	acme.must(http.MethodGet, "/api/v2/batches/"+batch.BatchID, nil, http.StatusOK, &status)
	if *status.Stats.Total != 2 || status.Status != "processing" || status.Jobs[0].Stats == nil {
		t.Fatalf("batch status %+v", status)
	}
	var batchCancel cliBatchCancelled
	acme.must(http.MethodPost, "/api/v2/batches/"+batch.BatchID+"/cancel", nil, http.StatusOK, &batchCancel)
	if batchCancel.TotalJobs != 2 || batchCancel.CancelledCount+batchCancel.SkippedCount != 2 {
		t.Fatalf("batch cancel %+v", batchCancel)
	}
	// A batch refused as a whole answers 400 in the batch's own shape.
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{}}, http.StatusBadRequest, &batch)
	if batch.Status != "error" || batch.Errors == nil {
		t.Fatalf("empty batch %+v", batch)
	}

	// font upload, list, show, delete.
	ttf, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatal("fonts-dejavu-core is not installed (make setup installs it): ", err)
	}
	code, raw := acme.uploadFont("Brand.ttf", ttf, "")
	var font cliFont
	if code != http.StatusCreated || json.Unmarshal(raw, &font) != nil || *font.FileName != "Brand.ttf" || font.CreatedAt == nil {
		t.Fatalf("font upload: %d %s", code, raw)
	}
	var fonts []cliFont
	acme.must(http.MethodGet, "/api/v2/fonts", nil, http.StatusOK, &fonts)
	acme.must(http.MethodGet, "/api/v2/fonts/"+*font.ID, nil, http.StatusOK, &font)
	if len(fonts) != 1 || *font.FamilyName != "DejaVu Sans" {
		t.Fatalf("fonts %+v", fonts)
	}
	if code, _, _ := acme.call(http.MethodDelete, "/api/v2/fonts/"+*font.ID, nil); code < 200 || code > 299 {
		t.Fatalf("font delete: %d", code)
	}

	// secret set (201), list, delete (2xx).
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "hook", "value": "s3cret"}, http.StatusCreated, nil)
	var secrets []cliSecret
	acme.must(http.MethodGet, "/api/v2/secrets", nil, http.StatusOK, &secrets)
	if len(secrets) != 1 || secrets[0].Name != "hook" || secrets[0].CreatedAt.IsZero() {
		t.Fatalf("secrets %+v", secrets)
	}
	if code, _, _ := acme.call(http.MethodDelete, "/api/v2/secrets/"+secrets[0].ID, nil); code < 200 || code > 299 {
		t.Fatalf("secret delete: %d", code)
	}
}
