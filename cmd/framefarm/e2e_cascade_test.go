package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// nestedJob is a parent rendering main with two children: an image into Photo and a video into
// Logo.
func nestedJob(tplID string) map[string]any {
	child := func(layer, output string) map[string]any {
		settings := map[string]any{"type": output}
		if output == "image" {
			settings["frames"] = 0
		}
		return map[string]any{"type": "job", "layerName": layer,
			"template": map[string]any{"id": tplID, "composition": "outro"},
			"assets":   []any{map[string]any{"type": "text", "layerName": "Credits", "value": "by " + layer}},
			"settings": settings}
	}
	return renderJob(tplID, child("Photo", "image"), child("Logo", "video"),
		map[string]any{"type": "text", "layerName": "Title", "value": "parent"})
}

func ids(jobs []job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestNestedJobRendersChildrenFirstAndInjectsTheirOutputs: the parent waits (pending) for its
// children, then renders with each child's output staged in its layer.
func TestNestedJobRendersChildrenFirstAndInjectsTheirOutputs(t *testing.T) {
	c := startCoordinator(t, options{slots: 2})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", nestedJob(tplID), http.StatusCreated, &cr)
	if cr.Status != "pending" || len(cr.Children) != 2 || cr.Children[0].Status != "queued" {
		t.Fatalf("creation answer %+v", cr)
	}
	parent := acme.job(cr.ID)
	if parent.Status != "pending" || !strings.Contains(parent.Stats.WaitingFor, "child") || len(parent.Children) != 2 {
		t.Fatalf("parent before children render: %+v", parent)
	}
	// Both children render at once (two slots); the parent cannot start before they finish.
	first, second := c.control.next(t), c.control.next(t)
	if got := sorted(first.JobID, second.JobID); !slices.Equal(got, sorted(cr.Children[0].ID, cr.Children[1].ID)) {
		t.Fatalf("rendering %v, want the children", got)
	}
	first.answer(renderReply{Result: "finish"})
	c.waitJob(first.JobID, "finished")
	if s := acme.job(cr.ID).Status; s != "pending" {
		t.Fatalf("parent %s after one child finished, want pending", s)
	}
	second.answer(renderReply{Result: "finish"})
	call := c.control.next(t)
	if call.JobID != cr.ID {
		t.Fatalf("rendering %s, want the parent %s", call.JobID, cr.ID)
	}
	// The parent's job assets arrive as the children's outputs, in order and in their layers.
	for i, child := range cr.Children {
		a := call.Assets[i]
		_, output := get(t, acme.job(child.ID).OutputURL)
		if a.LayerName != []string{"Photo", "Logo"}[i] || a.Type != []string{"image", "video"}[i] || a.SHA256 != sha(output) {
			t.Fatalf("parent asset %d: %+v; want child %s's output (%s)", i, a, child.ID, sha(output))
		}
	}
	call.answer(renderReply{Result: "finish"})
	c.waitJob(cr.ID, "finished")
	p := acme.job(cr.ID)
	if p.Assets[0]["jobId"] != cr.Children[0].ID {
		t.Fatalf("parent's job asset does not name its child: %v", p.Assets[0])
	}
}

func TestChildFailureFailsParentNamingTheChild(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", nestedJob(tplID), http.StatusCreated, &cr)
	call := c.control.next(t)
	call.answer(renderReply{Result: "fail", Message: "the font exploded"})
	c.waitJob(cr.ID, "error")
	parent := acme.job(cr.ID)
	if parent.Stats.Error == nil || !strings.Contains(*parent.Stats.Error, call.JobID) || !strings.Contains(*parent.Stats.Error, "the font exploded") {
		t.Fatalf("parent error %v; want it to name child %s and its error", parent.Stats.Error, call.JobID)
	}
	// The sibling, if still waiting, is failed too: its output has no use any more. It may
	// have been dispatched to the slot the failed child freed before the failure reached it; a
	// render in progress is not cut short.
	sibling := cr.Children[0].ID
	if sibling == call.JobID {
		sibling = cr.Children[1].ID
	}
	if c.waitFor("job", sibling, "error", "render:dorender") == "render:dorender" {
		c.control.next(t).answer(renderReply{Result: "finish"})
		c.waitJob(sibling, "finished")
		if s := acme.job(cr.ID).Status; s != "error" {
			t.Fatalf("parent %s after the sibling finished", s)
		}
		return
	}
	if e := acme.job(sibling).Stats.Error; e == nil || !strings.Contains(*e, cr.ID) {
		t.Fatalf("sibling error %v does not name the parent", e)
	}
}

func TestCancelParentCancelsWaitingChildren(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", nestedJob(tplID), http.StatusCreated, &cr)
	rendering := c.control.next(t) // one child renders; the other stays queued
	var cancelled []job
	acme.must(http.MethodPatch, "/api/v2/jobs/"+cr.ID+"/cancel", nil, http.StatusOK, &cancelled)
	queuedChild := cr.Children[0].ID
	if queuedChild == rendering.JobID {
		queuedChild = cr.Children[1].ID
	}
	if got, want := ids(cancelled), sorted(cr.ID, queuedChild); !slices.Equal(got, want) {
		t.Fatalf("cancelled %v, want parent and the queued child %v (the rendering one cannot be)", got, want)
	}
	if cancelled[0].ID != cr.ID {
		t.Fatalf("first cancelled job %s, want the one asked for", cancelled[0].ID)
	}
	for _, j := range cancelled {
		if j.Status != "manually_cancelled" || j.Stats.ErrorAt == nil {
			t.Fatalf("cancelled job %+v", j)
		}
	}
	// The rendering child finishes normally; the cancelled parent stays cancelled.
	rendering.answer(renderReply{Result: "finish"})
	c.waitJob(rendering.JobID, "finished")
	if s := acme.job(cr.ID).Status; s != "manually_cancelled" {
		t.Fatalf("parent %s after its child finished", s)
	}
	acme.fails(http.MethodPatch, "/api/v2/jobs/"+cr.ID+"/cancel", nil, http.StatusConflict, "not_cancellable")
}

func TestCancelChildCancelsParentAndWaitingSiblings(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", nestedJob(tplID), http.StatusCreated, &cr)
	var cancelled []job
	acme.must(http.MethodPatch, "/api/v2/jobs/"+cr.Children[1].ID+"/cancel", nil, http.StatusOK, &cancelled)
	if got, want := ids(cancelled), sorted(cr.ID, cr.Children[0].ID, cr.Children[1].ID); !slices.Equal(got, want) {
		t.Fatalf("cancelled %v, want child, parent and sibling %v", got, want)
	}
	if cancelled[0].ID != cr.Children[1].ID {
		t.Fatalf("the job asked for comes first, got %s", cancelled[0].ID)
	}
}

func TestCancelErrors(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme, other := c.team("acme"), c.team("other")
	tplID := acme.uploadTemplate(inspection())
	var a, b created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &a)
	rendering := c.control.next(t)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &b)

	acme.fails(http.MethodPatch, "/api/v2/jobs/"+a.ID+"/cancel", nil, http.StatusConflict, "not_cancellable")
	acme.fails(http.MethodPatch, "/api/v2/jobs/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel", nil, http.StatusNotFound, "not_found")
	acme.fails(http.MethodPatch, "/api/v2/jobs/not-an-id/cancel", nil, http.StatusBadRequest, "validation_error")
	other.fails(http.MethodPatch, "/api/v2/jobs/"+b.ID+"/cancel", nil, http.StatusNotFound, "not_found")

	// Many at once: any unknown id cancels nothing.
	e := acme.fails(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": []string{b.ID, "01ARZ3NDEKTSV4RRFFQ69G5FAV"}}, http.StatusNotFound, "not_found")
	if len(e.Details) != 1 || e.Details[0].Field != "jobs[1]" {
		t.Fatalf("details %+v", e.Details)
	}
	if s := acme.job(b.ID).Status; s != "queued" {
		t.Fatalf("job %s after a refused cancel", s)
	}
	acme.fails(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": []string{b.ID, b.ID}}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": []string{}}, http.StatusBadRequest, "validation_error")
	tooMany := make([]string, 1001)
	for i := range tooMany {
		tooMany[i] = b.ID
	}
	acme.fails(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": tooMany}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": []string{a.ID}}, http.StatusConflict, "not_cancellable")
	acme.fails(http.MethodPost, "/api/v2/jobs/cancel", `{"jobs": "nope"}`, http.StatusBadRequest, "validation_error")

	var cancelled []job
	acme.must(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": []string{a.ID, b.ID}}, http.StatusOK, &cancelled)
	if len(cancelled) != 1 || cancelled[0].ID != b.ID {
		t.Fatalf("cancelled %v, want only the queued job", ids(cancelled))
	}
	rendering.answer(renderReply{Result: "finish"})
	c.waitJob(a.ID, "finished")
}

// TestBatchCancelCascadesAndCounts: a batch cancel reaches each top-level job and its children,
// skips what cannot be cancelled, and counts each.
func TestBatchCancelCascadesAndCounts(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var plain created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &plain) // takes the only slot
	rendering := c.control.next(t)

	var batch struct {
		BatchID string    `json:"batchId"`
		Status  string    `json:"status"`
		Jobs    []created `json:"jobs"`
	}
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{renderJob(tplID), nestedJob(tplID), renderJob(tplID)}}, http.StatusCreated, &batch)
	var out struct {
		Status         string `json:"status"`
		TotalJobs      int    `json:"totalJobs"`
		CancelledCount int    `json:"cancelledCount"`
		SkippedCount   int    `json:"skippedCount"`
		Jobs           []struct {
			Index  int    `json:"index"`
			ID     string `json:"id"`
			Result string `json:"result"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"jobs"`
		CancelledJobs []job `json:"cancelledJobs"`
	}
	acme.must(http.MethodPost, "/api/v2/batches/"+batch.BatchID+"/cancel", nil, http.StatusOK, &out)
	nested := batch.Jobs[1]
	want := sorted(batch.Jobs[0].ID, nested.ID, nested.Children[0].ID, nested.Children[1].ID, batch.Jobs[2].ID)
	if out.Status != "cancelled" || out.TotalJobs != 3 || out.CancelledCount != 3 || out.SkippedCount != 0 || !slices.Equal(ids(out.CancelledJobs), want) {
		t.Fatalf("batch cancel %+v, cancelled %v; want every job and the nested children %v", out, ids(out.CancelledJobs), want)
	}
	for i, j := range out.Jobs {
		if j.Index != i || j.Result != "cancelled" || j.Status != "manually_cancelled" || j.Reason != "cancelled" {
			t.Fatalf("entry %d: %+v", i, j)
		}
	}
	acme.must(http.MethodPost, "/api/v2/batches/"+batch.BatchID+"/cancel", nil, http.StatusOK, &out)
	if out.Status != "unchanged" || out.CancelledCount != 0 || out.SkippedCount != 3 || out.Jobs[0].Result != "skipped" || out.Jobs[0].Reason != "not_cancellable" {
		t.Fatalf("second cancel %+v", out)
	}
	rendering.answer(renderReply{Result: "finish"})
	c.waitJob(plain.ID, "finished")
	c.team("stranger").fails(http.MethodPost, "/api/v2/batches/"+batch.BatchID+"/cancel", nil, http.StatusNotFound, "not_found")
}

func TestBatchPartialSuccessAndProgress(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	bad := renderJob(tplID, map[string]any{"type": "text", "layerName": "Nope", "value": "x"})
	var batch struct {
		BatchID      string    `json:"batchId"`
		Status       string    `json:"status"`
		TotalJobs    int       `json:"totalJobs"`
		SuccessCount int       `json:"successCount"`
		Jobs         []created `json:"jobs"`
		Errors       []struct {
			Index     int    `json:"index"`
			Error     string `json:"error"`
			ErrorCode string `json:"errorCode"`
		} `json:"errors"`
	}
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{renderJob(tplID), bad, renderJob(tplID), "not a job"}}, http.StatusCreated, &batch)
	if batch.Status != "partial" || batch.TotalJobs != 4 || batch.SuccessCount != 2 || len(batch.Jobs) != 2 || *batch.Jobs[1].Index != 2 {
		t.Fatalf("batch %+v", batch)
	}
	if len(batch.Errors) != 2 || batch.Errors[0].Index != 1 || batch.Errors[0].ErrorCode != "layer_not_found" || batch.Errors[1].ErrorCode != "validation_error" {
		t.Fatalf("errors %+v", batch.Errors)
	}
	for _, j := range batch.Jobs {
		c.waitJob(j.ID, "finished")
		if acme.job(j.ID).BatchID != batch.BatchID {
			t.Fatal("job does not name its batch")
		}
	}
	var progress struct {
		BatchID string `json:"batchId"`
		Status  string `json:"status"`
		Stats   struct {
			Total, Finished, Error, Pending int
		} `json:"stats"`
		Jobs []struct {
			Index     int    `json:"index"`
			ID        string `json:"id"`
			Status    string `json:"status"`
			OutputURL string `json:"outputUrl"`
			Stats     *struct {
				CreatedAt  string  `json:"createdAt"`
				FinishedAt *string `json:"finishedAt"`
			} `json:"stats"`
		} `json:"jobs"`
	}
	acme.must(http.MethodGet, "/api/v2/batches/"+batch.BatchID, nil, http.StatusOK, &progress)
	if progress.Status != "finished" || progress.Stats.Total != 2 || progress.Stats.Finished != 2 || progress.Jobs[1].Index != 2 || progress.Jobs[1].OutputURL == "" {
		t.Fatalf("batch progress %+v", progress)
	}
	for _, j := range progress.Jobs {
		if j.Stats == nil || j.Stats.CreatedAt == "" || j.Stats.FinishedAt == nil {
			t.Fatalf("batch item %s carries no stats of its job", j.ID)
		}
	}
	if status, _ := get(t, progress.Jobs[0].OutputURL); status != http.StatusOK {
		t.Fatalf("batch job output: %d", status)
	}

	// Every job invalid: the first problem also as the top-level error, which is what clients
	// that print one message (the official CLI) show.
	var failed struct {
		Status       string `json:"status"`
		SuccessCount *int   `json:"successCount"`
		Error        string `json:"error"`
		Code         string `json:"code"`
		Errors       []struct {
			Index     int    `json:"index"`
			ErrorCode string `json:"errorCode"`
		} `json:"errors"`
	}
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{"not a job", bad}}, http.StatusBadRequest, &failed)
	if failed.Status != "error" || failed.SuccessCount == nil || *failed.SuccessCount != 0 || len(failed.Errors) != 2 ||
		failed.Code != failed.Errors[0].ErrorCode || failed.Code == "" || !strings.HasPrefix(failed.Error, "no job of the batch is valid; jobs[0]: ") {
		t.Fatalf("all-failed batch %+v", failed)
	}
	// Refused as a whole (no jobs, jobs not an array, too many): the batch response's shape,
	// with the error's fields beside it, naming no batch (none was made).
	tooMany := make([]any, 1001)
	for i := range tooMany {
		tooMany[i] = renderJob(tplID)
	}
	for name, body := range map[string]any{"empty": map[string]any{"jobs": []any{}}, "not an array": map[string]any{"jobs": "x"},
		"missing": map[string]any{}, "too many": map[string]any{"jobs": tooMany}} {
		var refused struct {
			BatchID      string            `json:"batchId"`
			Status       string            `json:"status"`
			TotalJobs    *int              `json:"totalJobs"`
			SuccessCount *int              `json:"successCount"`
			Jobs         []json.RawMessage `json:"jobs"`
			Errors       []json.RawMessage `json:"errors"`
			Code         string            `json:"code"`
		}
		acme.must(http.MethodPost, "/api/v2/batches", body, http.StatusBadRequest, &refused)
		if refused.BatchID != "" || refused.Status != "error" || refused.TotalJobs == nil || refused.SuccessCount == nil ||
			refused.Jobs == nil || refused.Errors == nil || refused.Code != "validation_error" {
			t.Fatalf("batch %s: %+v", name, refused)
		}
	}
	acme.fails(http.MethodGet, "/api/v2/batches/01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, http.StatusNotFound, "not_found")
}

// TestTheTeamsBatchesAreListed: GET /api/v2/batches lists a team's batches newest first, page by
// page, with their jobs counted by state; another team sees none; a bad page is a 400.
func TestTheTeamsBatchesAreListed(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var made []string
	for range 3 {
		var b struct {
			BatchID string `json:"batchId"`
		}
		acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{renderJob(tplID), renderJob(tplID)}}, http.StatusCreated, &b)
		made = append([]string{b.BatchID}, made...)
	}
	acme.must(http.MethodPost, "/api/v2/batches/"+made[0]+"/cancel", nil, http.StatusOK, nil)
	type listed struct {
		BatchID string `json:"batchId"`
		Status  string `json:"status"`
		Stats   struct{ Total, Finished, Error, Pending, Cancelled int }
	}
	var first, second []listed
	acme.must(http.MethodGet, "/api/v2/batches?limit=2", nil, http.StatusOK, &first)
	acme.must(http.MethodGet, "/api/v2/batches?limit=2&from=2", nil, http.StatusOK, &second)
	all := append(first, second...)
	if len(all) != 3 || all[0].BatchID != made[0] || all[1].BatchID != made[1] || all[2].BatchID != made[2] {
		t.Fatalf("listed %+v, want %v", all, made)
	}
	if all[0].Status != "finished" || all[0].Stats.Cancelled != 2 || all[1].Status != "processing" || all[1].Stats.Pending != 2 || all[1].Stats.Total != 2 {
		t.Fatalf("counts %+v", all)
	}
	// A client that knows only total, finished, error and pending (the official CLI's batch
	// show) accounts for every job: cancels count as errors there, as the public service counts
	// them.
	for _, b := range all {
		if st := b.Stats; st.Finished+st.Error+st.Pending != st.Total || st.Cancelled > st.Error {
			t.Fatalf("counts that do not add up: %+v", b)
		}
	}
	var none []listed
	c.team("rival").must(http.MethodGet, "/api/v2/batches", nil, http.StatusOK, &none)
	if len(none) != 0 {
		t.Fatalf("another team lists %+v", none)
	}
	for _, q := range []string{"limit=0", "limit=101", "from=-1", "offset=3"} {
		acme.fails(http.MethodGet, "/api/v2/batches?"+q, nil, http.StatusBadRequest, "validation_error")
	}
}
