package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestListingFiltersAndSorts(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	create := func(priority int, tags ...string) string {
		b := renderJob(tplID)
		b["priority"] = priority
		b["tags"] = tags
		var cr created
		acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
		return cr.ID
	}
	a := create(0, "red")
	b := create(5, "blue")
	cID := create(5, "red", "blue")
	d := create(-1)
	acme.must(http.MethodPatch, "/api/v2/jobs/"+d+"/cancel", nil, http.StatusOK, nil)

	list := func(query string) ([]string, string) {
		t.Helper()
		var jobs []job
		h := acme.must(http.MethodGet, "/api/v2/jobs?"+query, nil, http.StatusOK, &jobs)
		out := make([]string, len(jobs))
		for i, j := range jobs {
			out[i] = j.ID
		}
		return out, h.Get("X-Total-Count")
	}
	check := func(query string, total string, want ...string) {
		t.Helper()
		got, count := list(query)
		if !slices.Equal(got, want) || count != total {
			t.Fatalf("%s: got %v (total %s), want %v (total %s)", query, got, count, want, total)
		}
	}
	check("", "4", a, b, cID, d)
	check("sort=newest_first", "4", d, cID, b, a)
	check("sort=priority", "4", b, cID, a, d)
	check("states=queued", "3", a, b, cID)
	check("exclude_states=queued", "1", d)
	check("states=manually_cancelled,queued&exclude_states=queued", "1", d)
	check("tags=red", "2", a, cID)
	check("tags=red,blue&sort=newest_first", "3", cID, b, a)
	check("from=1&limit=2", "4", b, cID)
	check("from=10", "4")
	// Date bounds: from_date includes, to_date excludes; creation times are those the API shows.
	var all []job
	acme.must(http.MethodGet, "/api/v2/jobs", nil, http.StatusOK, &all)
	bound := all[2].Stats.CreatedAt
	boundTime, err := time.Parse(time.RFC3339Nano, bound)
	if err != nil {
		t.Fatal(err)
	}
	var from, to []string
	for _, j := range all {
		// Compared as times: RFC 3339 drops trailing zeros, so ".61Z" is before ".614Z".
		if created, err := time.Parse(time.RFC3339Nano, j.Stats.CreatedAt); err == nil && !created.Before(boundTime) {
			from = append(from, j.ID)
		} else {
			to = append(to, j.ID)
		}
	}
	check("from_date="+url.QueryEscape(bound), fmt.Sprint(len(from)), from...)
	check("to_date="+url.QueryEscape(bound), fmt.Sprint(len(to)), to...)
	got, total := list("sort=random&states=queued")
	slices.Sort(got)
	if want := sorted(a, b, cID); !slices.Equal(got, want) || total != "3" {
		t.Fatalf("random: %v, want %v", got, want)
	}
	var minimal []map[string]any
	acme.must(http.MethodGet, "/api/v2/jobs?minimal=true&limit=1", nil, http.StatusOK, &minimal)
	keys := make([]string, 0)
	for k := range minimal[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "id,outputUrl,progress,stats,status,templateId" || len(minimal[0]["stats"].(map[string]any)) != 1 {
		t.Fatalf("minimal entry %v", minimal[0])
	}
	for _, bad := range []string{"limit=0", "limit=1001", "from=-1", "sort=sideways", "states=done", "tags=a%20b", "from_date=yesterday", "minimal=maybe", "page=2"} {
		acme.fails(http.MethodGet, "/api/v2/jobs?"+bad, nil, http.StatusBadRequest, "validation_error")
	}
}

func TestWaitingForAnEngineNoNodeHas(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	in := inspection()
	in.Engines = []string{"ae2026", "lottie"}
	tplID := acme.uploadTemplate(in)
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
	if w := acme.job(cr.ID).Stats.WaitingFor; !strings.Contains(w, `render node offers the "ae2026" engine`) {
		t.Fatalf("waitingFor %q", w)
	}
}

func TestWebhookRetriesCustomPayloadAndSecrets(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "HOOK_KEY", "value": "s3cr3t"}, http.StatusCreated, nil)

	// Fails twice, then accepts: the same delivery id every time, custom data only, secrets
	// resolved in the header at sending time.
	hooks := newWebhookReceiver(t, 500, 503, 200)
	b := renderJob(tplID)
	b["webhook"] = map[string]any{"url": hooks.url, "method": "PUT", "custom": true,
		"headers": map[string]string{"X-Key": "${secret.HOOK_KEY}"}, "data": map[string]any{"order": 7}}
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
	var deliveryID string
	for attempt := 1; attempt <= 3; attempt++ {
		h := hooks.next(t)
		if h.Method != http.MethodPut || string(h.Body) != `{"order":7}` || h.Header.Get("X-Key") != "s3cr3t" {
			t.Fatalf("attempt %d: %s %s %v", attempt, h.Method, h.Body, h.Header)
		}
		if deliveryID == "" {
			deliveryID = h.Header.Get("X-Webhook-Id")
		} else if h.Header.Get("X-Webhook-Id") != deliveryID {
			t.Fatal("a retry carries another X-Webhook-Id")
		}
	}

	// Always failing: one attempt and three retries, then given up and logged.
	failing := newWebhookReceiver(t, 500, 500, 500, 500, 500)
	b = renderJob(tplID)
	b["webhook"] = map[string]any{"url": failing.url}
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
	for range 4 {
		failing.next(t)
	}
	// A cancelled job fires its webhook too.
	cancelled := newWebhookReceiver(t)
	c2 := startCoordinator(t, options{slots: 0})
	other := c2.team("other")
	tpl2 := other.uploadTemplate(inspection())
	b = renderJob(tpl2)
	b["webhook"] = map[string]any{"url": cancelled.url}
	var queued created
	other.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &queued)
	other.must(http.MethodPatch, "/api/v2/jobs/"+queued.ID+"/cancel", nil, http.StatusOK, nil)
	var payload job
	json.Unmarshal(cancelled.next(t).Body, &payload)
	if payload.ID != queued.ID || payload.Status != "manually_cancelled" {
		t.Fatalf("cancel webhook %+v", payload)
	}
	// The given-up delivery shows in the job's log.
	c.waitFor("webhook", cr.ID, "failed")
	if _, logs, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+cr.ID+"/logs", nil); !strings.Contains(string(logs), "webhook failed after 4 attempts") {
		t.Fatalf("log does not say the webhook was given up:\n%s", logs)
	}
}

// TestRestartResumesEverything kills the coordinator with queued, pending and rendering jobs and
// a webhook still to deliver, and checks the new process finishes all of them.
func TestRestartResumesEverything(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	hooks := newWebhookReceiver(t, 503) // the first delivery fails, so a retry is pending at the kill

	var rendering, queued, parent created
	b := renderJob(tplID)
	b["webhook"] = map[string]any{"url": hooks.url}
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &rendering)
	call := c.control.next(t)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &queued)
	acme.must(http.MethodPost, "/api/v2/jobs", nestedJob(tplID), http.StatusCreated, &parent)
	if call.JobID != rendering.ID {
		t.Fatalf("rendering %s, want %s", call.JobID, rendering.ID)
	}
	c.kill()
	// Answered from here on: the restarted process's first render may ask before restart returns.
	c.control.answerAll(finishAll)
	c.restart()
	for _, id := range []string{rendering.ID, queued.ID, parent.ID, parent.Children[0].ID, parent.Children[1].ID} {
		c.waitJob(id, "finished")
	}
	j := acme.job(rendering.ID)
	if j.Attempts != 2 {
		t.Fatalf("the interrupted job ran %d attempts, want 2", j.Attempts)
	}
	_, logs, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+rendering.ID+"/logs", nil)
	if !strings.Contains(string(logs), "coordinator restarted during the render") {
		t.Fatalf("log:\n%s", logs)
	}
	var payload job
	for payload.Status != "finished" {
		json.Unmarshal(hooks.next(t).Body, &payload)
	}
	var list []job
	acme.must(http.MethodGet, "/api/v2/jobs?states=finished", nil, http.StatusOK, &list)
	if len(list) != 5 {
		t.Fatalf("%d finished jobs after the restart, want 5", len(list))
	}
}

// TestGracefulStopRequeuesWithoutPenalty: SIGTERM interrupts a render; after the restart the job
// renders again and the interruption does not count as a failed attempt.
func TestGracefulStopRequeuesWithoutPenalty(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, config: "\n[jobs]\nmax_attempts = 1\n"})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
	c.control.next(t)
	c.stop()
	c.control.answerAll(finishAll) // before the restart: its render may ask before restart returns
	c.restart()
	c.waitJob(cr.ID, "finished")
}

func TestRetryableFailuresThenGiveUp(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
	c.control.next(t).answer(renderReply{Result: "retry", Message: "GPU fell off"})
	call := c.control.next(t)
	if call.Attempt != 2 {
		t.Fatalf("attempt %d after a retryable failure, want 2", call.Attempt)
	}
	p := 40.0
	call.answer(renderReply{Progress: &p})
	call = c.control.next(t)
	c.waitFor("progress", cr.ID, "40")
	if j := acme.job(cr.ID); j.Status != "render:dorender" || j.Progress != 40 || j.Attempts != 2 {
		t.Fatalf("job while rendering %+v", j)
	}
	call.answer(renderReply{Result: "retry", Message: "GPU fell off again"})
	c.control.next(t).answer(renderReply{Result: "retry", Message: "and again"})
	c.waitJob(cr.ID, "error")
	j := acme.job(cr.ID)
	if j.Stats.Error == nil || !strings.Contains(*j.Stats.Error, "after 3 attempts") || !strings.Contains(*j.Stats.Error, "GPU fell off again") {
		t.Fatalf("error %v", j.Stats.Error)
	}
	// A plain failure is final at once.
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
	c.control.next(t).answer(renderReply{Result: "fail", Message: "layer Title is locked"})
	c.waitJob(cr.ID, "error")
	if j := acme.job(cr.ID); j.Attempts != 1 || *j.Stats.Error != "layer Title is locked" {
		t.Fatalf("job %+v", j)
	}
}

func TestJoinStitchesStaticVideosAndChildren(t *testing.T) {
	c := startCoordinator(t, options{slots: 2})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	clip := []byte("a video clip")
	srv := newFileServer(t, map[string][]byte{"/intro.mp4": clip})
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs/join", map[string]any{
		"assets": []any{
			map[string]any{"type": "video", "src": srv + "/intro.mp4"},
			map[string]any{"type": "job", "template": map[string]any{"id": tplID, "composition": "main"}, "assets": []any{}},
		},
		"settings": map[string]any{"preset": "mp4"},
	}, http.StatusCreated, &cr)
	if u, err := url.Parse(cr.OutputURL); err != nil || cr.Status != "pending" || len(cr.Children) != 1 || !strings.HasSuffix(u.Path, ".mp4") {
		t.Fatalf("join %+v", cr)
	}
	c.waitJob(cr.ID, "finished")
	_, out := get(t, acme.job(cr.ID).OutputURL)
	var stitched renderCall
	json.Unmarshal(out, &stitched)
	_, childOut := get(t, acme.job(cr.Children[0].ID).OutputURL)
	if stitched.Engine != "ffmpeg" || len(stitched.Assets) != 2 || stitched.Assets[0].SHA256 != sha(clip) || stitched.Assets[1].SHA256 != sha(childOut) {
		t.Fatalf("the stitcher got %+v", stitched)
	}
	acme.fails(http.MethodPost, "/api/v2/jobs/join", map[string]any{"assets": []any{}}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPost, "/api/v2/jobs/join", map[string]any{"assets": []any{map[string]any{"type": "image", "src": "https://example.com/a.png"}}}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPost, "/api/v2/jobs/join", map[string]any{"assets": []any{map[string]any{"type": "video", "src": "https://example.com/a.mp4"}}, "settings": map[string]any{"preset": "gif"}}, http.StatusBadRequest, "validation_error")
}

func TestTokenCreateCommand(t *testing.T) {
	dir := t.TempDir()
	out, err := framefarm("token", "create", "--data-dir", dir, "--team", "studio")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	token := lines[len(lines)-1]
	if !strings.HasPrefix(token, "ff_") || !strings.Contains(string(out), `created team "studio"`) {
		t.Fatalf("output:\n%s", out)
	}
	// The token works on a server using that data directory; while it runs, the command goes
	// through it, for the same team.
	c := newCoordinator(t, options{})
	if out, err := framefarm("token", "create", "--data-dir", c.dataDir(), "--team", "studio"); err != nil {
		t.Fatalf("%v: %s", err, out)
	} else {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		token = lines[len(lines)-1]
	}
	c.launch("127.0.0.1:0")
	(&client{c: c, token: token}).must(http.MethodGet, "/api/v2/jobs", nil, http.StatusOK, nil)
	out, err = framefarm("token", "create", "--data-dir", c.dataDir(), "--team", "studio")
	var team struct{ WebhookSigningSecret string }
	(&client{c: c, token: token}).must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, &team)
	// The same lines as without a server: the team's webhook signing secret among them.
	if err != nil || !strings.Contains(string(out), `team "studio"`) || !strings.Contains(string(out), "through the server") ||
		team.WebhookSigningSecret == "" || !strings.Contains(string(out), "webhook signing secret: "+team.WebhookSigningSecret+"\n") ||
		!strings.Contains(string(out), c.url+"/ui/#token=") {
		t.Fatalf("token create beside a running server: %v\n%s", err, out)
	}
	if out, err := framefarm("token", "create", "--data-dir", dir); err == nil {
		t.Fatalf("token create without a team succeeded:\n%s", out)
	}

	// token list and token revoke, through the running server: the revoked token stops at once
	// although the server had it cached.
	client := &client{c: c, token: lastLine(out)}
	client.must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, nil)
	id := tokenIDIn(t, out)
	listed, err := framefarm("token", "list", "--data-dir", c.dataDir())
	if err != nil || !strings.Contains(string(listed), id) || !strings.Contains(string(listed), "studio") || strings.Contains(string(listed), client.token) {
		t.Fatalf("token list: %v\n%s", err, listed)
	}
	if out, err := framefarm("token", "revoke", "--data-dir", c.dataDir(), id); err != nil {
		t.Fatalf("token revoke: %v\n%s", err, out)
	}
	client.fails(http.MethodGet, "/api/v2/team", nil, http.StatusUnauthorized, "unauthorized")
	// Without a server, straight in the database; an expiry is listed.
	c.stop()
	if out, err := framefarm("token", "create", "--data-dir", c.dataDir(), "--team", "studio", "--expires", "24h"); err != nil || !strings.Contains(string(out), "expires ") {
		t.Fatalf("token create --expires: %v\n%s", err, out)
	}
	listed, _ = framefarm("token", "list", "--data-dir", c.dataDir())
	if strings.Contains(string(listed), id) || strings.Count(string(listed), "\n") != 3 {
		t.Fatalf("token list after the revocation:\n%s", listed)
	}
	if out, err := framefarm("token", "revoke", "--data-dir", c.dataDir(), id); err == nil || !strings.Contains(string(out), "no token") {
		t.Fatalf("revoking twice: %v\n%s", err, out)
	}
	if out, _ := framefarm("version"); !strings.HasPrefix(string(out), "framefarm ") {
		t.Fatalf("version: %s", out)
	}
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// tokenIDIn reads the id token create prints ("token id ID, a ROLE's (...").
func tokenIDIn(t *testing.T, out []byte) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(out), "token id ")
	if !ok || len(rest) < 16 {
		t.Fatalf("no token id in:\n%s", out)
	}
	return rest[:16]
}

func newFileServer(t *testing.T, files map[string][]byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPendingWebhookSurvivesARestart: a delivery waiting for its retry is in the outbox; after a
// SIGKILL the new process delivers it, with the same delivery id.
func TestPendingWebhookSurvivesARestart(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, webhookBackoff: `["1s"]`})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	hooks := newWebhookReceiver(t, 503)
	b := renderJob(tplID)
	b["webhook"] = map[string]any{"url": hooks.url}
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
	first := hooks.next(t)
	c.waitFor("webhook", cr.ID, "retrying") // durable: the retry is in the outbox, due in about 1s
	c.kill()
	c.restart()
	retry := hooks.next(t)
	if retry.Header.Get("X-Webhook-Id") != first.Header.Get("X-Webhook-Id") {
		t.Fatal("the delivery id changed across the restart")
	}
	c.waitFor("webhook", cr.ID, "delivered")
}

// TestStopARenderingJob: the v2 cancel keeps refusing a rendering job; the stop route ends it
// manually_cancelled, says who in its log, sends its webhook once, stops the render on its node
// (the slot renders the next job), keeps no output; a queued job is cancelled by it; an ended
// one is refused.
func TestStopARenderingJob(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	hook := newWebhookReceiver(t)
	b := renderJob(tplID)
	b["webhook"] = map[string]any{"url": hook.url}
	var rendering, queued created
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &rendering)
	call := c.control.next(t)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &queued)
	acme.fails(http.MethodPatch, "/api/v2/jobs/"+rendering.ID+"/cancel", nil, http.StatusConflict, "not_cancellable")

	var stopped job
	acme.must(http.MethodPost, "/api/v2/jobs/"+rendering.ID+"/stop", nil, http.StatusOK, &stopped)
	if stopped.Status != "manually_cancelled" || stopped.Stats.Error == nil || !strings.HasPrefix(*stopped.Stats.Error, "stopped by team acme (token ") {
		t.Fatalf("stopped %+v", stopped)
	}
	select {
	case <-call.gone:
	case <-time.After(waitLimit):
		t.Fatal("the render went on on its node")
	}
	next := c.control.next(t) // the slot came back: the queued job renders
	if next.JobID != queued.ID {
		t.Fatalf("the slot went to %s", next.JobID)
	}
	var hooked job
	json.Unmarshal(hook.next(t).Body, &hooked)
	if hooked.ID != rendering.ID || hooked.Status != "manually_cancelled" {
		t.Fatalf("the stop's webhook %+v", hooked)
	}
	if log := acme.logs(rendering.ID); !strings.Contains(log, "stopped by team acme (token ") || !strings.Contains(log, "while rendering on node") {
		t.Fatalf("the stopped job's log:\n%s", log)
	}
	if status, _ := get(t, stopped.OutputURL); status != http.StatusNotFound {
		t.Fatalf("the stopped job's output answers %d", status)
	}

	// A queued job is cancelled by a stop; an ended one has nothing to stop.
	var third created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &third)
	acme.must(http.MethodPost, "/api/v2/jobs/"+third.ID+"/stop", nil, http.StatusOK, &stopped)
	if stopped.Status != "manually_cancelled" {
		t.Fatalf("a queued job stopped: %s", stopped.Status)
	}
	acme.fails(http.MethodPost, "/api/v2/jobs/"+third.ID+"/stop", nil, http.StatusConflict, "not_cancellable")
	c.team("rival").fails(http.MethodPost, "/api/v2/jobs/"+queued.ID+"/stop", nil, http.StatusNotFound, "not_found")
	next.answer(renderReply{Result: "finish"})
	c.waitJob(queued.ID, "finished")
	select {
	case extra := <-hook.received:
		t.Fatalf("a second webhook: %s", extra.Body)
	default:
	}
}

// TestRetryAFailedJob: a job that failed, or was cancelled, is created again with its payload,
// nested jobs included, tagged with its id; it keeps its own end; a finished job is refused.
func TestRetryAFailedJob(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	b := renderJob(tplID, map[string]any{"type": "text", "layerName": "Title", "value": "Hello again"})
	b["tags"] = []string{"campaign", "retry-of-01ARZ3NDEKTSV4RRFFQ69G5FAV"}
	b["priority"] = 7
	var failed created
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &failed)
	c.control.next(t).answer(renderReply{Result: "fail", Message: "the engine refused it"})
	c.waitJob(failed.ID, "error")

	var again created
	acme.must(http.MethodPost, "/api/v2/jobs/"+failed.ID+"/retry", nil, http.StatusCreated, &again)
	call := c.control.next(t)
	if call.JobID != again.ID || len(call.Assets) != 1 || call.Assets[0].Value != `"Hello again"` {
		t.Fatalf("the retry renders %+v", call)
	}
	call.answer(renderReply{Result: "finish"})
	c.waitJob(again.ID, "finished")
	retried := acme.job(again.ID)
	if !slices.Equal(retried.Tags, []string{"campaign", "retry-of-" + failed.ID}) || retried.Priority != 7 {
		t.Fatalf("the retry's tags %v, priority %d", retried.Tags, retried.Priority)
	}
	if j := acme.job(failed.ID); j.Status != "error" {
		t.Fatalf("the retried job is now %s", j.Status)
	}
	acme.fails(http.MethodPost, "/api/v2/jobs/"+again.ID+"/retry", nil, http.StatusConflict, "conflict")
	c.team("rival").fails(http.MethodPost, "/api/v2/jobs/"+failed.ID+"/retry", nil, http.StatusNotFound, "not_found")

	// A cancelled job with a nested job: both come again.
	c.control.answerAll(nil)
	var holder created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &holder)
	hold := c.control.next(t)
	nested := renderJob(tplID, map[string]any{"type": "job", "layerName": "Photo", "template": map[string]any{"id": tplID, "composition": "outro"}})
	var parent created
	acme.must(http.MethodPost, "/api/v2/jobs", nested, http.StatusCreated, &parent)
	acme.must(http.MethodPatch, "/api/v2/jobs/"+parent.ID+"/cancel", nil, http.StatusOK, nil)
	var parentAgain created
	acme.must(http.MethodPost, "/api/v2/jobs/"+parent.ID+"/retry", nil, http.StatusCreated, &parentAgain)
	if parentAgain.Status != "pending" || len(parentAgain.Children) != 1 || parentAgain.Children[0].ID == parent.Children[0].ID {
		t.Fatalf("the retried parent %+v (was %+v)", parentAgain, parent)
	}
	c.control.answerAll(finishAll)
	hold.answer(renderReply{Result: "finish"})
	c.waitJob(parentAgain.ID, "finished")
}

// TestChangeAQueuedJobsPriorityAndTags: a queued job given a higher priority renders first;
// new tags find it in listings; a rendering job's are refused, and so is a body out of bounds.
func TestChangeAQueuedJobsPriorityAndTags(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var holder, first, second created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &holder)
	hold := c.control.next(t)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &first)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &second)

	var changed job
	acme.must(http.MethodPatch, "/api/v2/jobs/"+second.ID, map[string]any{"priority": 10, "tags": "urgent,client-7"}, http.StatusOK, &changed)
	if changed.Priority != 10 || !slices.Equal(changed.Tags, []string{"urgent", "client-7"}) || changed.Status != "queued" {
		t.Fatalf("changed %+v", changed)
	}
	var tagged []job
	acme.must(http.MethodGet, "/api/v2/jobs?tags=urgent", nil, http.StatusOK, &tagged)
	if len(tagged) != 1 || tagged[0].ID != second.ID {
		t.Fatalf("listed by the new tag: %+v", tagged)
	}
	if log := acme.logs(second.ID); !strings.Contains(log, "priority 10 and tags [urgent,client-7] set by team acme (token ") {
		t.Fatalf("the changed job's log:\n%s", log)
	}
	acme.fails(http.MethodPatch, "/api/v2/jobs/"+holder.ID, map[string]any{"priority": 1}, http.StatusConflict, "conflict")
	acme.fails(http.MethodPatch, "/api/v2/jobs/"+first.ID, map[string]any{"priority": 1.5}, http.StatusBadRequest, "validation_error")
	acme.fails(http.MethodPatch, "/api/v2/jobs/"+first.ID, map[string]any{}, http.StatusBadRequest, "validation_error")
	c.team("rival").fails(http.MethodPatch, "/api/v2/jobs/"+first.ID, map[string]any{"priority": 1}, http.StatusNotFound, "not_found")

	hold.answer(renderReply{Result: "finish"})
	next := c.control.next(t)
	if next.JobID != second.ID {
		t.Fatalf("after the change, %s renders before the job given priority 10", next.JobID)
	}
	c.control.answerAll(finishAll)
	next.answer(renderReply{Result: "finish"})
	c.waitJob(first.ID, "finished")
}

// TestTheAdminTokenIsKeptAndFound: the farm admin's token of a data folder survives restarts;
// `token admin` prints it with a link that signs the dashboard in; `node list` on the machine
// finds it without being given one; the first start says how to get both, by commands that name
// this binary and the data folder by absolute paths.
func TestTheAdminTokenIsKeptAndFound(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	adminToken := func() string {
		t.Helper()
		out, err := framefarm("token", "admin", "--data-dir", c.dataDir())
		_, rest, found := strings.Cut(string(out), "/ui/#token=")
		if err != nil || !found || !strings.Contains(string(out), c.url+"/ui/#token=") {
			t.Fatalf("token admin: %v\n%s", err, out)
		}
		return strings.TrimSpace(rest)
	}
	first := adminToken()
	(&client{c: c, token: first}).must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, nil)
	if out, err := framefarm("node", "list", "--data-dir", c.dataDir()); err != nil || !strings.Contains(string(out), "embedded-") {
		t.Fatalf("node list without a token: %v\n%s", err, out)
	}
	greeting := c.stdout.String()
	abs, _ := filepath.Abs(c.dataDir())
	for _, line := range strings.Split(greeting, "\n") {
		if fields := strings.Fields(line); len(fields) > 3 && slices.Contains(fields, "token") && slices.Contains(fields, "--data-dir") {
			self := fields[slices.Index(fields, "token")-1]
			if !filepath.IsAbs(self) || fields[slices.Index(fields, "--data-dir")+1] != abs {
				t.Errorf("a first-start command that does not run as written from another folder: %q", line)
			}
			if _, err := os.Stat(self); err != nil {
				t.Errorf("the first-start command names %s: %v", self, err)
			}
		}
	}
	if !strings.Contains(greeting, "token admin --data-dir "+abs) || !strings.Contains(greeting, "token create --data-dir "+abs+" --team NAME") {
		t.Fatalf("the first start says:\n%s", greeting)
	}
	c.stop()
	c.restart()
	if again := adminToken(); again != first {
		t.Fatalf("the admin token changed with a restart: %s, then %s", first, again)
	}
	(&client{c: c, token: first}).must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, nil)
	t.Setenv(envAdminToken, "")
	if out, err := framefarm("node", "list", "--data-dir", t.TempDir()); err == nil || !strings.Contains(string(out), "no admin token") {
		t.Fatalf("node list with no token to find: %v\n%s", err, out)
	}
}

// TestListingOneTemplatesJobs: ?template= lists one template's jobs, newest or oldest first,
// with states and paging; it is refused with tags or another order, or a malformed id.
func TestListingOneTemplatesJobs(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	acme := c.team("acme")
	promo, outro := acme.uploadTemplate(inspection()), acme.uploadTemplate(inspection())
	var promoJobs []string
	for i := range 5 {
		var cr created
		acme.must(http.MethodPost, "/api/v2/jobs", renderJob([]string{promo, outro}[i%2]), http.StatusCreated, &cr)
		if i%2 == 0 {
			promoJobs = append(promoJobs, cr.ID)
		}
	}
	acme.must(http.MethodPatch, "/api/v2/jobs/"+promoJobs[1]+"/cancel", nil, http.StatusOK, nil)
	ids := func(q string) []string {
		t.Helper()
		var jobs []job
		acme.must(http.MethodGet, "/api/v2/jobs?"+q, nil, http.StatusOK, &jobs)
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	if got := ids("template=" + promo + "&sort=newest_first"); !slices.Equal(got, []string{promoJobs[2], promoJobs[1], promoJobs[0]}) {
		t.Fatalf("newest first %v, want the reverse of %v", got, promoJobs)
	}
	if got := ids("template=" + promo + "&states=queued&limit=1&from=1"); !slices.Equal(got, []string{promoJobs[2]}) {
		t.Fatalf("queued, second page of one: %v", got)
	}
	if got := ids("template=" + outro + "&states=manually_cancelled"); len(got) != 0 {
		t.Fatalf("another template's cancelled jobs: %v", got)
	}
	if got := ids("template=01ARZ3NDEKTSV4RRFFQ69G5FAV"); len(got) != 0 {
		t.Fatalf("an unknown template's jobs: %v", got)
	}
	for _, q := range []string{"template=x", "template=" + promo + "&tags=a", "template=" + promo + "&sort=priority"} {
		acme.fails(http.MethodGet, "/api/v2/jobs?"+q, nil, http.StatusBadRequest, "validation_error")
	}
	var rival []job
	c.team("rival").must(http.MethodGet, "/api/v2/jobs?template="+promo, nil, http.StatusOK, &rival)
	if len(rival) != 0 {
		t.Fatalf("another team lists %d of acme's jobs", len(rival))
	}
}
