package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestQuickStartFlow walks the README: token, template, job, render, output, webhook.
func TestQuickStartFlow(t *testing.T) {
	c := startCoordinator(t, options{slots: 2})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())

	var tpl templateAnswer
	acme.must(http.MethodGet, "/api/v2/templates/"+tplID, nil, http.StatusOK, &tpl)
	if tpl.Status != "uploaded" || strings.Join(tpl.Compositions, ",") != "main,outro" || strings.Join(tpl.Layers, ",") != "Title,Photo,Logo,Credits" {
		t.Fatalf("template after upload: %+v", tpl)
	}

	hooks := newWebhookReceiver(t)
	body := renderJob(tplID, map[string]any{"type": "text", "layerName": "Title", "value": "Hello, farm"})
	body["webhook"] = map[string]any{"url": hooks.url + "/done", "data": map[string]string{"order": "42"}}
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &cr)
	if cr.Status != "queued" || cr.OutputURL == "" || cr.MissingFonts == nil {
		t.Fatalf("creation answer %+v", cr)
	}
	c.waitJob(cr.ID, "finished")

	j := acme.job(cr.ID)
	if j.Status != "finished" || j.Progress != 100 || j.Stats.FinishedAt == nil || j.Stats.RenderDuration == nil || j.OutputURL == "" {
		t.Fatalf("finished job %+v", j)
	}
	status, out := get(t, j.OutputURL)
	if status != http.StatusOK {
		t.Fatalf("output download: %d %s", status, out)
	}
	var rendered renderCall
	if err := json.Unmarshal(out, &rendered); err != nil || rendered.JobID != cr.ID || rendered.Assets[0].Value != `"Hello, farm"` {
		t.Fatalf("output %s does not show the injected text", out)
	}

	hook := hooks.next(t)
	var payload job
	if err := json.Unmarshal(hook.Body, &payload); err != nil {
		t.Fatal(err)
	}
	if payload.ID != cr.ID || payload.Status != "finished" || string(payload.Data) != `{"order":"42"}` {
		t.Fatalf("webhook body %s", hook.Body)
	}
	var team struct {
		Secret  string   `json:"webhookSigningSecret"`
		Engines []string `json:"engines"`
	}
	acme.must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, &team)
	if !slices.Contains(team.Engines, "lottie") {
		t.Fatalf("the team is told the farm's engines are %v; its node renders lottie", team.Engines)
	}
	mac := hmac.New(sha256.New, []byte(team.Secret))
	mac.Write([]byte(hook.Header.Get("X-Webhook-Timestamp") + "." + string(hook.Body)))
	if want := "v1=" + hex.EncodeToString(mac.Sum(nil)); hook.Header.Get("X-Webhook-Signature") != want {
		t.Fatalf("signature %q, want %q", hook.Header.Get("X-Webhook-Signature"), want)
	}
	if hook.Header.Get("X-Webhook-Id") == "" || hook.Method != http.MethodPost || hook.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("webhook headers %v", hook.Header)
	}

	c.waitFor("webhook", cr.ID, "delivered")
	_, metrics := get(t, c.url+"/metrics")
	for _, want := range []string{`framefarm_jobs{state="finished"} 1`, `framefarm_jobs_total{event="created"} 1`,
		`framefarm_webhook_deliveries_total{result="delivered"} 1`, `framefarm_render_duration_seconds_count{engine="lottie"} 1`,
		`framefarm_http_request_duration_seconds_count{code="201",method="POST",route="/api/v2/jobs"} 1`,
		"framefarm_store_commit_duration_seconds_count", `framefarm_queue_depth{engine="lottie"} 0`, "framefarm_queue_oldest_age_seconds 0"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	status, logs, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+cr.ID+"/logs", nil)
	if status != http.StatusOK || !strings.Contains(string(logs), "dispatched to node") || !strings.Contains(string(logs), "test renderer") {
		t.Fatalf("logs %d:\n%s", status, logs)
	}
}

// TestMadeUpMethodsDoNotGrowTheMetrics: requests with made-up methods, from anyone, are counted
// under one method label, so they cannot add series to /metrics one by one.
func TestMadeUpMethodsDoNotGrowTheMetrics(t *testing.T) {
	c := startCoordinator(t, options{slots: 0})
	for i := range 20 {
		req, _ := http.NewRequest(fmt.Sprintf("BREW%d", i), c.url+"/api/v2/jobs", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	_, metrics := get(t, c.url+"/metrics")
	if strings.Contains(string(metrics), `method="BREW`) || !strings.Contains(string(metrics), `method="OTHER"`) {
		t.Fatalf("made-up methods in the metrics:\n%s", grepLines(string(metrics), "framefarm_http_request_duration_seconds_count"))
	}
}

// grepLines keeps the lines holding text.
func grepLines(s, text string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, text) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestCoordinatorHasASpareProcessor: the coordinator runs with one Go processor more than the
// CPUs it may use (its committer, back from each fsync, must not queue behind request
// handlers), unless GOMAXPROCS is set in its environment.
func TestCoordinatorHasASpareProcessor(t *testing.T) {
	c := startCoordinator(t, options{cpus: firstAllowedCPU(t)})
	processors := func() string {
		_, metrics := get(t, c.url+"/metrics")
		for line := range strings.Lines(string(metrics)) {
			if value, ok := strings.CutPrefix(line, "go_sched_gomaxprocs_threads "); ok {
				return strings.TrimSpace(value)
			}
		}
		t.Fatalf("metrics lack go_sched_gomaxprocs_threads:\n%s", metrics)
		return ""
	}
	if n := processors(); n != "2" {
		t.Fatalf("on one CPU the coordinator runs %s processors, want 2", n)
	}
	c.stop()
	c.env = []string{"GOMAXPROCS=1"}
	c.restart()
	if n := processors(); n != "1" {
		t.Fatalf("with GOMAXPROCS=1 set the coordinator runs %s processors", n)
	}
}

// firstAllowedCPU is the first CPU this process may run on (a container may exclude CPU 0).
func firstAllowedCPU(t *testing.T) string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if list, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.FieldsFunc(list, func(r rune) bool { return r == '-' || r == ',' || r == ' ' || r == '\t' || r == '\n' })[0]
		}
	}
	t.Fatal("/proc/self/status has no Cpus_allowed_list")
	return ""
}

// TestARendersLogIsReadWhileItRuns: the engine's lines reach the job's log with its progress,
// before the render ends; its last lines come with the result, each line once.
func TestARendersLogIsReadWhileItRuns(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &cr)
	forty := 40.0
	c.control.next(t).answer(renderReply{Log: "frame 12 of 30 rendered", Progress: &forty})
	c.waitFor("progress", cr.ID, "40")
	if log := acme.logs(cr.ID); !strings.Contains(log, "test renderer: "+cr.ID+" attempt 1") || !strings.Contains(log, "frame 12 of 30 rendered") {
		t.Fatalf("the log while the job renders:\n%s", log)
	}
	if j := acme.job(cr.ID); j.Status != "render:dorender" {
		t.Fatalf("the job is %s", j.Status)
	}
	c.control.next(t).answer(renderReply{Log: "frame 30 of 30 rendered", Result: "finish"})
	c.waitJob(cr.ID, "finished")
	log := acme.logs(cr.ID)
	if strings.Count(log, "frame 12 of 30 rendered") != 1 || strings.Count(log, "test renderer:") != 1 ||
		strings.Index(log, "frame 12") > strings.Index(log, "frame 30 of 30") || strings.Index(log, "frame 30 of 30") > strings.Index(log, "finished on node") {
		t.Fatalf("the finished job's log:\n%s", log)
	}
}
