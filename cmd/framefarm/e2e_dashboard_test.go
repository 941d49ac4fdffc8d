package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/framefarm/framefarm/http/api"
)

// browserTab starts headless Chromium (Debian's, installed by make test) at a laptop's size and
// returns a tab; more tabs of the same browser come from newTab.
func browserTab(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (make test installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("autoplay-policy", "no-user-gesture-required"))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	tab, cancelTimeout := context.WithTimeout(tab, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	acceptDialogs(tab)
	return tab
}

// acceptDialogs answers yes to every confirm() the page asks, as a user who means the click.
func acceptDialogs(tab context.Context) {
	dialogs := chromedp.Events(tab, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(tab, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
}

func newTab(t *testing.T, browser context.Context) context.Context {
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	// The first run opens the tab and ties it to its context: this one, not a step's.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("a new tab: %v", err)
	}
	return tab
}

// screenshot saves what the page shows into $FRAMEFARM_ARTIFACTS (or the test's folder).
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv("FRAMEFARM_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	os.MkdirAll(dir, 0o755)
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100)) // quality 100 is a PNG
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

// browseStepLimit bounds one step of a browser test, well inside the tab's three minutes.
const browseStepLimit = time.Minute

func browse(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	step, cancel := context.WithTimeout(tab, browseStepLimit)
	defer cancel()
	if err := chromedp.Do(step, actions...); err != nil {
		// What the page showed when the step gave up: the tab outlives the step.
		screenshot(t, tab, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs an action that answers a value.
func value[T any](t *testing.T, tab context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(tab, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// liveText is the text of the element selector names, read in one step of the page's script: an
// element the page draws anew as events arrive (a node's row, a chart) may be replaced between
// the steps of chromedp.Text, which then fails to find the node it queried.
func liveText(t *testing.T, tab context.Context, what, selector string) string {
	t.Helper()
	return value(t, tab, what, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%s)?.innerText ?? ""`, strconv.Quote(selector))))
}

// TestDashboardInARealBrowser: a team signs in through a link's fragment (which is cleared), sees
// jobs appear and their progress move without a reload, cancels a job from the page, uploads a
// template and reads its layers; another team sees none of it; the admin drains a node.
func TestDashboardInARealBrowser(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	browser := browserTab(t)
	tab := browser

	// Signing in through the fragment: the token leaves the address at once.
	browse(t, tab, "sign in",
		chromedp.Navigate(c.url+"/ui/#token="+acme.token),
		chromedp.WaitVisible(`//h1[starts-with(normalize-space(.), "Jobs")]`),
		chromedp.WaitVisible(`.live.on`))
	hash := value(t, tab, "hash", chromedp.Evaluate[string](`location.hash`))
	stored := value(t, tab, "stored token", chromedp.Evaluate[string](`localStorage.getItem("framefarm.token")`))
	if hash != "" || stored != acme.token {
		t.Fatalf("after signing in: hash %q, stored token kept %v", hash, stored == acme.token)
	}

	// A job created through the API appears, and its progress moves, without a reload.
	var first created
	hook := newWebhookReceiver(t, http.StatusServiceUnavailable) // refuses once, then takes it
	withHook := renderJob(tplID)
	withHook["webhook"] = map[string]any{"url": hook.url}
	acme.must(http.MethodPost, "/api/v2/jobs", withHook, http.StatusCreated, &first)
	row := fmt.Sprintf(`tr[data-job="%s"]`, first.ID)
	browse(t, tab, "the new job's row", chromedp.WaitVisible(row))
	call := c.control.next(t)
	forty := 40.0
	call.answer(renderReply{Progress: &forty})
	browse(t, tab, "progress 40", chromedp.WaitVisible(row+` [role=progressbar][aria-valuenow="40"]`))
	screenshot(t, tab, "jobs")
	c.control.next(t).answer(renderReply{Result: "finish"})
	browse(t, tab, "finished", chromedp.WaitVisible(row+` .badge[data-status="finished"]`))

	// Cancel from the page: one job holds the slot, the queued one is cancelled.
	var holding, queued created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &holding)
	hold := c.control.next(t)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &queued)
	queuedRow := fmt.Sprintf(`tr[data-job="%s"]`, queued.ID)
	browse(t, tab, "cancel from the page",
		chromedp.WaitVisible(queuedRow+` .badge[data-status="queued"]`),
		chromedp.Click(queuedRow+` input[type=checkbox]`),
		chromedp.Click(`//button[normalize-space(.)="Cancel selected"]`),
		chromedp.WaitVisible(queuedRow+` .badge[data-status="manually_cancelled"]`))
	if j := acme.job(queued.ID); j.Status != "manually_cancelled" {
		t.Fatalf("the API says the job cancelled from the page is %s", j.Status)
	}
	c.control.answerAll(finishAll)
	hold.answer(renderReply{Result: "finish"})

	// The job's screen, by a deep link, with its webhook's two attempts.
	hook.next(t)
	hook.next(t)
	c.waitFor("webhook", first.ID, "delivered")
	browse(t, tab, "job screen",
		chromedp.Navigate(c.url+"/ui/jobs/"+first.ID),
		chromedp.WaitVisible(`//h1//span[contains(., "`+first.ID+`")]`),
		chromedp.WaitVisible(`//dt[.="Finished"]`),
		chromedp.WaitVisible(`#deliveries .badge.cancelled`), // attempt 1: 503, retrying
		chromedp.WaitVisible(`#deliveries .badge.finished`),  // attempt 2: delivered
		chromedp.WaitVisible(`#render-time`))
	screenshot(t, tab, "job")
	// A cancelled job's end says so; its retry links back to it, and it to its retry.
	browse(t, tab, "a cancelled job's page, and its retry",
		chromedp.Navigate(c.url+"/ui/jobs/"+queued.ID),
		chromedp.WaitVisible(`//dt[.="Cancelled"]`),
		chromedp.Click(`//h1//button[normalize-space(.)="Retry"]`),
		chromedp.WaitVisible(`//dt[.="Retry of"]/following-sibling::dd[1]/a[.="`+queued.ID+`"]`))
	retried := value(t, tab, "the retry's id", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))
	browse(t, tab, "the cancelled job links to its retry",
		chromedp.Navigate(c.url+"/ui/jobs/"+queued.ID),
		chromedp.WaitVisible(`#retried-as a[href="/ui/jobs/`+retried+`"]`))

	// Upload a template through the page's file input, and read its layers.
	file := filepath.Join(t.TempDir(), "promo.zip")
	os.WriteFile(file, templateZip(t, inspection()), 0o600)
	browse(t, tab, "template upload",
		chromedp.Navigate(c.url+"/ui/templates"),
		chromedp.WaitReady(`#template-file`),
		chromedp.SetUploadFiles(`#template-file`, []string{file}),
		chromedp.WaitVisible(`[data-composition="main"] [data-layer="Title"]`),
		chromedp.WaitVisible(`[data-composition="outro"] [data-layer="Credits"]`),
		chromedp.WaitVisible(`#poster[data-status="finished"]`))
	screenshot(t, tab, "template")
	// The page asked for its poster frame once: the middle frame of the outermost composition.
	uploaded := value(t, tab, "the uploaded template's id", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))
	var posters []job
	acme.must(http.MethodGet, "/api/v2/jobs?minimal=false&tags=poster-"+uploaded, nil, http.StatusOK, &posters)
	if len(posters) != 1 || posters[0].Composition != "main" || posters[0].Settings["type"] != "image" || posters[0].Settings["frames"] != 75.0 {
		t.Fatalf("the poster frames the page asked for: %+v", posters)
	}

	// Deleting a template whose poster still waits for the busy slot: the page cancels the
	// poster, then deletes the template.
	c.control.answerAll(nil)
	var busy created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &busy)
	busySlot := c.control.next(t)
	browse(t, tab, "a second template, its poster queued",
		chromedp.Navigate(c.url+"/ui/templates"),
		chromedp.WaitReady(`#template-file`),
		chromedp.SetUploadFiles(`#template-file`, []string{file}),
		chromedp.WaitVisible(`#poster[data-status="queued"]`))
	second := value(t, tab, "the second template's id", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))
	browse(t, tab, "delete it",
		chromedp.Click(`//button[normalize-space(.)="Delete"]`),
		chromedp.WaitVisible(`//h1[starts-with(normalize-space(.), "Templates")]`))
	if status, _, _ := acme.call(http.MethodGet, "/api/v2/templates/"+second, nil); status != http.StatusNotFound {
		t.Fatalf("the template deleted from the page answers %d", status)
	}
	acme.must(http.MethodGet, "/api/v2/jobs?tags=poster-"+second, nil, http.StatusOK, &posters)
	if len(posters) != 1 || posters[0].Status != "manually_cancelled" {
		t.Fatalf("the deleted template's poster: %+v", posters)
	}
	c.control.answerAll(finishAll)
	busySlot.answer(renderReply{Result: "finish"})

	// A named batch: its counts as a stacked bar, its jobs by name, and a cancel that reaches
	// every queued job while the first renders; it ends with one finished and two cancelled.
	c.control.answerAll(nil)
	var batch struct {
		BatchID string `json:"batchId"`
	}
	named := func(name string) map[string]any { j := renderJob(tplID); j["name"] = name; return j }
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"name": "Spring campaign",
		"jobs": []any{named("Teaser A"), named("Teaser B"), named("Teaser C")}}, http.StatusCreated, &batch)
	firstOfBatch := c.control.next(t)
	browse(t, tab, "batch",
		chromedp.Navigate(c.url+"/ui/batches/"+batch.BatchID),
		chromedp.WaitVisible(`//h1[contains(., "Spring campaign")]`),
		chromedp.WaitVisible(`//tr[@data-job]//div[.="Teaser B"]`),
		chromedp.WaitVisible(`//tr[@data-job]/td[3][contains(., "Test")]`), // its template, by name
		chromedp.WaitVisible(`.stack .seg.rendering`),
		chromedp.Click(`//button[normalize-space(.)="Cancel the batch"]`),
		chromedp.WaitVisible(`.stack .seg.cancelled`))
	firstOfBatch.answer(renderReply{Result: "finish"})
	browse(t, tab, "the batch ends, not all finished",
		chromedp.WaitVisible(`//h1/span[@data-status="ended"][.="ended, 2 cancelled"]`)) // not "finished", not a red "error"
	screenshot(t, tab, "batch")
	var status struct {
		Status string
		Stats  struct{ Cancelled int }
	}
	acme.must(http.MethodGet, "/api/v2/batches/"+batch.BatchID, nil, http.StatusOK, &status)
	if status.Stats.Cancelled != 2 || status.Status != "finished" { // error only when every job failed
		t.Fatalf("the page's batch cancel: %+v", status)
	}
	browse(t, tab, "the list of batches",
		chromedp.Navigate(c.url+"/ui/batches"),
		chromedp.WaitVisible(fmt.Sprintf(`//tr[@data-batch="%s"][contains(., "Spring campaign") and contains(., "1 finished, 2 cancelled of 3")]`, batch.BatchID)))
	c.control.answerAll(finishAll)

	// Fonts and secrets: a font by its file input, a secret by the form; the value never shows.
	const secretValue = "never-shown-s3cr3t"
	browse(t, tab, "fonts and secrets",
		chromedp.Navigate(c.url+"/ui/library"),
		chromedp.WaitReady(`#font-file`),
		chromedp.SetUploadFiles(`#font-file`, []string{"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"}),
		chromedp.WaitVisible(`tr[data-font="DejaVuSans.ttf"]`),
		chromedp.SendKeys(`#secret-name`, "hook_token"),
		chromedp.SendKeys(`#secret-value`, secretValue),
		chromedp.Click(`//button[normalize-space(.)="Add secret"]`),
		chromedp.WaitVisible(`tr[data-secret="hook_token"]`))
	screenshot(t, tab, "library")
	if page := value(t, tab, "library page", chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(page, secretValue) {
		t.Fatal("the secret's value is in the page")
	}
	if text := value(t, tab, "the library's text", chromedp.Text(`main`)); strings.Contains(text, "null") {
		t.Errorf("a submitter's fonts and secrets show null:\n%s", text)
	}
	var secrets []struct{ Name string }
	acme.must(http.MethodGet, "/api/v2/secrets", nil, http.StatusOK, &secrets)
	if len(secrets) != 1 || secrets[0].Name != "hook_token" {
		t.Fatalf("secrets after the page's form: %+v", secrets)
	}
	browse(t, tab, "delete the font and the secret",
		chromedp.Click(`tr[data-font="DejaVuSans.ttf"] button`),
		chromedp.WaitVisible(`//td[contains(., "No fonts.") and contains(., "family name")]`),
		chromedp.Click(`tr[data-secret="hook_token"] button`),
		chromedp.WaitVisible(`//td[contains(., "No secrets.")]`))
	var fonts []struct{ FileName string }
	acme.must(http.MethodGet, "/api/v2/fonts", nil, http.StatusOK, &fonts)
	acme.must(http.MethodGet, "/api/v2/secrets", nil, http.StatusOK, &secrets)
	if len(fonts) != 0 || len(secrets) != 0 {
		t.Fatalf("after deleting from the page: fonts %+v, secrets %+v", fonts, secrets)
	}

	// Another team sees none of acme's jobs.
	other := c.team("other")
	otherTab := newTab(t, browser)
	browse(t, otherTab, "team b",
		chromedp.Navigate(c.url+"/ui/#token="+other.token),
		chromedp.WaitVisible(`//td[contains(., "No jobs yet")]`))
	listed := value(t, otherTab, "team b's page", chromedp.Text(`main`))
	if strings.Contains(listed, first.ID) || strings.Contains(listed, queued.ID) {
		t.Fatal("another team's dashboard lists acme's jobs")
	}

	// The admin sees the farm and drains the embedded node.
	adminTab := newTab(t, browser)
	browse(t, adminTab, "drain",
		chromedp.Navigate(c.url+"/ui/#token="+adminToken),
		chromedp.WaitVisible(`//h1[starts-with(normalize-space(.), "Farm")]`),
		chromedp.WaitVisible(`h1 .live.on`),             // the farm's event stream is open
		chromedp.WaitVisible(`svg.chart rect.finished`), // the last hour's charts show the finished jobs
		chromedp.WaitVisible(`tr[data-node] .badge[data-status="ready"]`),
		chromedp.Click(`//tr[@data-node]//button[normalize-space(.)="drain"]`),
		chromedp.WaitVisible(`tr[data-node] .badge[data-status="drained"]`), // draining, with nothing left to render
		chromedp.WaitVisible(`tr[data-node] td[data-field="pools"]`))
	screenshot(t, adminTab, "farm")
	if axes := liveText(t, adminTab, "the charts' scales", `.charts`); strings.Contains(axes, " or ") {
		t.Errorf("a chart's scale counts two things: %q", axes)
	}
	// A job behind the drained node says so, on its page as in its log.
	var behind created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &behind)
	const drained = `the only render node offering the "lottie" engine is draining`
	c.waitUntil("the job behind the drained node says why", func() bool { return acme.job(behind.ID).Stats.WaitingFor == drained })
	browse(t, tab, "the waiting job's page",
		chromedp.Navigate(c.url+"/ui/jobs/"+behind.ID),
		chromedp.WaitVisible(`//dt[.="Waiting for"]/following-sibling::dd[1][.='`+drained+`']`))
	// A team's Farm tab shows what it has of the farm and used of it.
	browse(t, tab, "the team's farm",
		chromedp.Navigate(c.url+"/ui/farm#token="+acme.token), // the admin's tab signed this browser in as the admin
		chromedp.WaitVisible(`#team-usage tr[data-engine="lottie"]`),
		chromedp.WaitVisible(`//dd[@id="team-engines"][contains(., "none")]`), // the only node is drained
		chromedp.WaitVisible(`#team-usage-chart svg.chart`))
	screenshot(t, tab, "farm-team")
	if frames := liveText(t, tab, "the team's frames", `#team-usage tr[data-engine="all"] td:nth-child(3)`); frames == "0" {
		t.Error("the team's farm tab counts no frame rendered")
	}
	if machine := liveText(t, adminTab, "the node's machine", `tr[data-node] td.machine`); !strings.Contains(machine, " CPUs") {
		t.Errorf("the node's machine shows %q", machine)
	}
	if axis := liveText(t, adminTab, "a chart's time axis", `.chart-panel .axis-x`); !strings.Contains(axis, "now") {
		t.Errorf("a chart's time axis shows %q", axis)
	}
	var nodes []struct{ State string }
	(&client{c: c, token: adminToken}).must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, &nodes)
	if len(nodes) != 1 || nodes[0].State != "draining" {
		t.Fatalf("nodes after the page's drain: %+v", nodes)
	}

	// On a phone's width the page does not overflow sideways (tables scroll in their frame).
	phone := newTab(t, browser)
	browse(t, phone, "phone",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(c.url+"/ui/jobs#token="+acme.token),
		chromedp.WaitReady(row))
	if fits := value(t, phone, "phone width", chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`)); !fits {
		t.Error("the jobs screen is wider than a phone")
	}
	screenshot(t, phone, "jobs-phone")
	browse(t, phone, "a template on a phone",
		chromedp.Navigate(c.url+"/ui/templates/"+uploaded),
		chromedp.WaitVisible(`#poster[data-status="finished"]`))
	if fits := value(t, phone, "phone width", chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`)); !fits {
		t.Error("the template screen is wider than a phone")
	}
	screenshot(t, phone, "template-phone")

	// Signing out forgets the token.
	browse(t, tab, "sign out", chromedp.Click(`#signout`), chromedp.WaitVisible(`#token`))
	if forgotten := value(t, tab, "token after sign out", chromedp.Evaluate[bool](`localStorage.getItem("framefarm.token") === null`)); !forgotten {
		t.Fatal("signing out kept the token")
	}
	if navShown := value(t, tab, "navigation before sign-in", chromedp.Evaluate[bool](`getComputedStyle(document.getElementById("nav")).display !== "none"`)); navShown {
		t.Error("the navigation shows before sign-in")
	}
	// A sign-in link pasted into the tab already on the dashboard changes only the fragment.
	browse(t, tab, "a sign-in link pasted into the open tab",
		chromedp.Evaluate[chromedp.Void](`location.hash = "#token=`+other.token+`"`),
		chromedp.WaitVisible(`//span[@id="who"][.="team other"]`))
	if hash := value(t, tab, "address after the pasted link", chromedp.Evaluate[string](`location.href`)); strings.Contains(hash, "token") {
		t.Errorf("the token stays in the address: %s", hash)
	}
}

// TestRootAndFaviconAnswerHeadAndGet: link checkers and uptime probes send HEAD /; browsers ask
// for /favicon.ico whatever the page names.
func TestRootAndFaviconAnswerHeadAndGet(t *testing.T) {
	c := startCoordinator(t, options{})
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path, location string }{
		{http.MethodGet, "/", "/ui/"}, {http.MethodHead, "/", "/ui/"},
		{http.MethodGet, "/favicon.ico", "/ui/favicon.svg"}, {http.MethodHead, "/favicon.ico", "/ui/favicon.svg"},
	} {
		req, _ := http.NewRequest(tc.method, c.url+tc.path, nil)
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 3 || !strings.HasSuffix(resp.Header.Get("Location"), tc.location) {
			t.Errorf("%s %s: %d to %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(method, c.url+"/ui/favicon.svg", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
			t.Errorf("%s the favicon: %d %s", method, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestDashboardPlaysARealRender: from upload to playback in the page, as a new user would: a
// Lottie template uploaded by the file input, a render started from its screen with a text of
// our own, and the output playing in the job's screen (the video reports the 2 s rendered); the
// job's timeline shows its attempt and its end.
func TestDashboardPlaysARealRender(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, realEngines: true})
	acme := c.team("acme")
	file := filepath.Join(t.TempDir(), "kenburns.zip")
	os.WriteFile(file, fixtureZip(t, "lottie/synthetic"), 0o600)
	tab := browserTab(t)
	browse(t, tab, "upload and render",
		chromedp.Navigate(c.url+"/ui/templates#token="+acme.token),
		chromedp.WaitReady(`#template-file`),
		chromedp.SetUploadFiles(`#template-file`, []string{file}),
		chromedp.WaitVisible(`input[data-text-layer="Title"]`),
		chromedp.WaitVisible(`#poster img`))
	posterWidth := value(t, tab, "the poster's width",
		chromedp.Poll[float64](`document.querySelector("#poster img").complete && document.querySelector("#poster img").naturalWidth`,
			chromedp.WithPollingTimeout(time.Minute)))
	if posterWidth != 1920 {
		t.Fatalf("the poster frame is %v pixels wide, want the composition's 1920", posterWidth)
	}
	screenshot(t, tab, "template-poster")
	browse(t, tab, "render from the template's page",
		chromedp.SendKeys(`input[data-text-layer="Title"]`, "From the dashboard"),
		chromedp.SetValue(`#render-output`, "preview"),
		chromedp.Click(`#render-submit`),
		chromedp.WaitVisible(`#output-video`))
	duration := value(t, tab, "the video's duration",
		chromedp.Poll[float64](`document.querySelector("#output-video").readyState >= 1 && document.querySelector("#output-video").duration`,
			chromedp.WithPollingTimeout(time.Minute)))
	if duration < 1.9 || duration > 2.1 {
		t.Fatalf("the video reports %v s, want the 2 s rendered", duration)
	}
	browse(t, tab, "timeline",
		chromedp.WaitVisible(`ol.timeline li.attempt`),
		chromedp.WaitVisible(`ol.timeline li.finished`))
	screenshot(t, tab, "job-video")
	var jobs []job
	acme.must(http.MethodGet, "/api/v2/jobs?minimal=false&sort=newest_first", nil, http.StatusOK, &jobs)
	if len(jobs) != 2 || jobs[0].Status != "finished" || len(jobs[0].Assets) != 1 || jobs[0].Assets[0]["value"] != "From the dashboard" {
		t.Fatalf("the job the page made: %+v", jobs)
	}
}

// TestDashboardActsOnJobs: a waiting job's priority and tags change from its page; a rendering
// job is stopped (after a confirmation) and retried; the list keeps its filters in the address
// and finds a job by its id; the admin's Jobs screen names the teams; a template that failed
// inspection is deleted from its page; the browser itself checks a secret's name.
func TestDashboardActsOnJobs(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	tab := browserTab(t)
	var rendering, queued created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &rendering)
	call := c.control.next(t)
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID, map[string]any{"type": "text", "layerName": "Title", "value": "Hello from the page"}),
		http.StatusCreated, &queued)

	// Its page says what each asset puts where.
	browse(t, tab, "a queued job",
		chromedp.Navigate(c.url+"/ui/jobs/"+queued.ID+"#token="+acme.token),
		chromedp.WaitVisible(`#retag`),
		chromedp.WaitVisible(`//ul[contains(@class, "assets")]/li[contains(., "text → Title") and contains(., "“Hello from the page”")]`))
	if text := value(t, tab, "the job's page", chromedp.Text(`main`)); strings.Contains(text, "null") {
		t.Errorf("the page of a job without output shows null:\n%s", text)
	}
	browse(t, tab, "priority and tags",
		chromedp.SetValue(`#job-priority`, "9"),
		chromedp.SetValue(`#job-tags`, "urgent, client-7"),
		chromedp.Click(`#retag button[type=submit]`),
		chromedp.WaitVisible(`//dt[.="Tags"]/following-sibling::dd[1][.="urgent, client-7"]`))
	if j := acme.job(queued.ID); j.Priority != 9 || strings.Join(j.Tags, ",") != "urgent,client-7" {
		t.Fatalf("after the page's change: priority %d, tags %v", j.Priority, j.Tags)
	}
	screenshot(t, tab, "job-queued")

	c.control.answerAll(nil)
	browse(t, tab, "stop a render",
		chromedp.Navigate(c.url+"/ui/jobs/"+rendering.ID),
		chromedp.Click(`//h1//button[normalize-space(.)="Stop"]`),
		chromedp.WaitVisible(`h1 .badge[data-status="manually_cancelled"]`),
		chromedp.WaitVisible(`//dt[.="Stopped"]`),
		chromedp.WaitVisible(`//ol[contains(@class, "timeline")]/li[contains(@class, "cancelled") and contains(., "stopped by")]`))
	select {
	case <-call.gone:
	case <-time.After(waitLimit):
		t.Fatal("the render stopped from the page went on")
	}
	browse(t, tab, "retry it",
		chromedp.Click(`//h1//button[normalize-space(.)="Retry"]`),
		chromedp.WaitVisible(`//dt[.="Tags"]/following-sibling::dd[1][contains(., "retry-of-`+rendering.ID+`")]`))

	browse(t, tab, "a filter in the address",
		chromedp.Navigate(c.url+"/ui/jobs?tags=urgent"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-job="%s"]`, queued.ID)),
		chromedp.Reload(),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-job="%s"]`, queued.ID)))
	if rows := value(t, tab, "rows", chromedp.Evaluate[int](`document.querySelectorAll("tr[data-job]").length`)); rows != 1 {
		t.Errorf("the list filtered by tag urgent shows %d jobs", rows)
	}
	if kept := value(t, tab, "the search box", chromedp.Evaluate[string](`document.getElementById("job-search").value`)); kept != "urgent" {
		t.Errorf("after a reload the search box holds %q", kept)
	}
	browse(t, tab, "the keyboard opens the first job",
		chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`),
		chromedp.KeyEvent("j"),
		chromedp.WaitVisible(`tr.cursor[data-job]`),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(`//h1//span[contains(., "`+queued.ID+`")]`))
	browse(t, tab, "back to the list", chromedp.NavigateBack(), chromedp.WaitVisible(`#job-search`))
	var other created
	otherTpl := acme.uploadTemplate(inspection()) // named "Test" too: the first of that name is found
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(otherTpl), http.StatusCreated, &other)
	browse(t, tab, "search by template name",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("job-search").value = ""`),
		chromedp.SendKeys(`#job-search`, "test\r"),
		chromedp.WaitVisible(`#template-filter`))
	shown := value(t, tab, "rows of one template", chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr[data-job]")].map((tr) => tr.dataset.job)`))
	if len(shown) == 0 || (slices.Contains(shown, other.ID) && slices.Contains(shown, queued.ID)) {
		t.Errorf("the jobs listed for one template: %v (one of %s, %s)", shown, queued.ID, other.ID)
	}
	browse(t, tab, "search by id",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("job-search").value = ""`),
		chromedp.SendKeys(`#job-search`, rendering.ID+"\r"),
		chromedp.WaitVisible(`//h1//span[contains(., "`+rendering.ID+`")]`))

	var batch struct {
		BatchID string `json:"batchId"`
	}
	acme.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{renderJob(tplID), renderJob(tplID)}}, http.StatusCreated, &batch)
	browse(t, tab, "the list of batches",
		chromedp.Navigate(c.url+"/ui/batches"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-batch="%s"] .stack`, batch.BatchID)),
		chromedp.Click(fmt.Sprintf(`tr[data-batch="%s"] a`, batch.BatchID)),
		chromedp.WaitVisible(`//h1[starts-with(normalize-space(.), "Batch")]//span[.="`+batch.BatchID+`"]`))

	var broken templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Broken"}, http.StatusCreated, &broken)
	acme.put(broken.UploadInfo.URL, []byte("not a zip"), http.StatusOK)
	browse(t, tab, "delete a template in error",
		chromedp.Navigate(c.url+"/ui/templates/"+broken.ID),
		chromedp.WaitVisible(`h1 .badge[data-status="error"]`),
		chromedp.Click(`//h1//button[normalize-space(.)="Delete"]`),
		chromedp.WaitVisible(`//h1[starts-with(normalize-space(.), "Templates")]`))
	acme.fails(http.MethodGet, "/api/v2/templates/"+broken.ID, nil, http.StatusNotFound, "template_not_found")

	browse(t, tab, "a secret's name",
		chromedp.Navigate(c.url+"/ui/library"),
		chromedp.SendKeys(`#secret-name`, "bad name"))
	if mismatch := value(t, tab, "the name's validity", chromedp.Evaluate[bool](`document.getElementById("secret-name").validity.patternMismatch`)); !mismatch {
		t.Error("the browser does not check the secret name's pattern")
	}

	admin := newTab(t, tab)
	browse(t, admin, "the admin's jobs screen",
		chromedp.Navigate(c.url+"/ui/jobs#token="+adminToken),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-job="%s"] td[data-team="acme"]`, queued.ID)))
	if text := value(t, admin, "the admin's page", chromedp.Text(`main`)); strings.Contains(text, "HTTP") {
		t.Errorf("the admin's jobs screen shows a raw status:\n%s", text)
	}

	// A system that asks for a dark theme gets one.
	dark := newTab(t, tab)
	if _, err := chromedp.Call(dark, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	browse(t, dark, "dark", chromedp.Navigate(c.url+"/ui/batches#token="+acme.token), chromedp.WaitVisible(`tr[data-batch]`))
	if bg := value(t, dark, "the page's background", chromedp.Evaluate[string](`getComputedStyle(document.documentElement).backgroundColor`)); bg != "rgb(14, 18, 27)" {
		t.Errorf("in a dark system the page's background is %s", bg)
	}
	screenshot(t, dark, "batches-dark")
	c.control.answerAll(finishAll)
}

// TestDashboardShowsASplitJobsChunks: a split job's page shows its chunks as one bar, a segment
// per chunk coloured by its state and marked with its node, and follows them to the end.
func TestDashboardShowsASplitJobsChunks(t *testing.T) {
	c, acme, _ := clusterFarm(t, 2)
	tpl := acme.uploadTemplate(inspection())
	var made created
	acme.must(http.MethodPost, "/api/v2/jobs", splitJob(tpl, 50), http.StatusCreated, &made)
	calls := chunkCalls(t, c, 2)
	forty := 40.0
	calls[0].answer(renderReply{Progress: &forty})
	again := c.control.next(t)
	calls[50].answer(renderReply{Result: "finish"})
	last := chunkCalls(t, c, 1)[100]
	c.waitUntil("the second chunk finished and the first at 40%", func() bool {
		j := acme.job(made.ID)
		return len(j.Chunks) == 3 && j.Chunks[1].Status == "finished" && j.Chunks[0].Progress == 40
	})

	tab := browserTab(t)
	browse(t, tab, "a split job's page",
		chromedp.Navigate(c.url+"/ui/jobs/"+made.ID+"#token="+acme.token),
		chromedp.WaitVisible(`.chunks .chunk.finished`))
	segments := value(t, tab, "its chunks", chromedp.Evaluate[[]string](`[...document.querySelectorAll(".chunks .chunk")].map((e) => e.className + " " + e.title)`))
	if len(segments) != 3 || !strings.Contains(segments[0], "rendering") || !strings.Contains(segments[0], "40%") ||
		!strings.Contains(segments[1], "finished") || !strings.Contains(segments[1], "frames 50 to 99") || !strings.Contains(segments[1], "on "+calls[50].Node) {
		t.Fatalf("the chunk bar: %q", segments)
	}
	// Its own team reads each chunk's row too, and its attempts over the chunks; only the admin
	// may send one again.
	browse(t, tab, "the chunk table",
		chromedp.WaitVisible(`#chunk-table tr[data-chunk="1"] td[data-field="render-time"]`),
		chromedp.WaitVisible(`//dd[@id="attempts"][contains(., "over its 3 chunks")]`))
	if buttons := value(t, tab, "the chunk table's buttons", chromedp.Evaluate[int](`document.querySelectorAll("#chunk-table button").length`)); buttons != 0 {
		t.Errorf("a team's chunk table offers %d buttons", buttons)
	}
	if took := liveText(t, tab, "the finished chunk's render time", `#chunk-table tr[data-chunk="1"] td[data-field="render-time"]`); took == "" {
		t.Error("the finished chunk shows no render time")
	}
	screenshot(t, tab, "job-split")

	again.answer(renderReply{Result: "finish"})
	last.answer(renderReply{Result: "finish"})
	c.control.answerAll(finishAll)
	browse(t, tab, "the job ends",
		chromedp.WaitVisible(`//h2[.="Chunks (3 of 3 rendered)"]`),
		chromedp.WaitVisible(`h1 .badge[data-status="finished"]`))
}

// TestDashboardGovernsTheFarm: the farm's admin lists every team's jobs with their team, name,
// priority and tags, narrows them by team, sends one chunk of a split job again from its chunk
// table, cancels another team's job, and sets a team's policy beside the farm's share and usage;
// a viewer's token is shown no button it would be refused, and a manager issues a token.
func TestDashboardGovernsTheFarm(t *testing.T) {
	c, acme, _ := clusterFarm(t, 2) // acme is the team "cluster"
	globex := c.team("globex")
	admin := &client{c: c, token: adminToken}
	tokenOf := func(role string) string {
		var out struct {
			Token string `json:"token"`
		}
		admin.must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "cluster", "role": role}, http.StatusCreated, &out)
		return out.Token
	}
	split := splitJob(acme.uploadTemplate(inspection()), 50)
	split["name"] = "Spring promo, split"
	var made, teaser created
	acme.must(http.MethodPost, "/api/v2/jobs", split, http.StatusCreated, &made)
	calls := chunkCalls(t, c, 2)
	waiting := renderJob(globex.uploadTemplate(inspection()))
	waiting["name"], waiting["priority"], waiting["tags"] = "Globex teaser", 5, []string{"client-9"}
	globex.must(http.MethodPost, "/api/v2/jobs", waiting, http.StatusCreated, &teaser)

	tab := browserTab(t)
	browse(t, tab, "every team's jobs",
		chromedp.Navigate(c.url+"/ui/jobs#token="+adminToken),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-job="%s"] td[data-team="cluster"]`, made.ID)),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-job="%s"] td[data-team="globex"]`, teaser.ID)),
		chromedp.WaitVisible(`//tr[@data-job="`+teaser.ID+`"][contains(., "Globex teaser") and contains(., "client-9")]`),
		chromedp.WaitVisible(`//tr[@data-job="`+made.ID+`"]/td[6]/span[.="Test"]`), // its template by name, as the admin sees no team's templates
		chromedp.WaitReady(`//select[@id="job-team"]/option[@value="globex"]`))
	screenshot(t, tab, "admin-jobs")
	browse(t, tab, "one team's",
		chromedp.SetValue(`#job-team`, "globex"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("job-team").dispatchEvent(new Event("change"))`),
		chromedp.WaitNotPresent(fmt.Sprintf(`tr[data-job="%s"]`, made.ID)),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-job="%s"]`, teaser.ID)))
	if got := value(t, tab, "the address", chromedp.Evaluate[string](`location.search`)); !strings.Contains(got, "team=globex") {
		t.Errorf("the team filter is not in the address: %q", got)
	}
	// The Farm screen names what each node renders: the split job, by name, chunk by chunk.
	browse(t, tab, "what the nodes render",
		chromedp.Navigate(c.url+"/ui/farm"),
		chromedp.WaitVisible(`//td[@data-field="rendering"]/div[a[@href="/ui/jobs/`+made.ID+`"][.="Spring promo, split"] and contains(., "chunk")]`))
	screenshot(t, tab, "farm-rendering")

	// Both nodes render the split job's chunks: globex's job waits, and the admin cancels it.
	browse(t, tab, "cancel another team's waiting job",
		chromedp.Navigate(c.url+"/ui/jobs/"+teaser.ID),
		chromedp.WaitVisible(`//dt[.="Name"]/following-sibling::dd[1][.="Globex teaser"]`),
		chromedp.Click(`//h1//button[normalize-space(.)="Cancel"]`),
		chromedp.WaitVisible(`h1 .badge[data-status="manually_cancelled"]`))
	if j := globex.job(teaser.ID); j.Status != "manually_cancelled" {
		t.Fatalf("globex's job after the admin's cancel: %s", j.Status)
	}

	// The split job's chunks, one by one: the first is taken back from its node and queued again.
	browse(t, tab, "the split job's chunk table",
		chromedp.Navigate(c.url+"/ui/jobs/"+made.ID),
		chromedp.WaitVisible(`#chunk-table tr[data-chunk="0"] .badge[data-status="render:dorender"]`),
		chromedp.WaitVisible(`//dt[.="Team"]/following-sibling::dd[1][.="cluster"]`))
	screenshot(t, tab, "admin-split")
	browse(t, tab, "send the first chunk again", chromedp.Click(`#chunk-table tr[data-chunk="0"] button`))
	select {
	case <-calls[0].gone:
	case <-time.After(waitLimit):
		t.Fatal("the chunk sent again from the page kept rendering on its node")
	}
	// It renders again (the third chunk, waiting, may go first).
	for {
		next := c.control.next(t)
		if !next.Chunk {
			t.Fatalf("a render that is not one of the split job's chunks: %+v", next)
		}
		next.answer(renderReply{Result: "finish"})
		if next.Settings.Frames.Start == 0 {
			break
		}
	}
	calls[50].answer(renderReply{Result: "finish"})
	c.control.answerAll(finishAll)
	c.waitJob(made.ID, "finished")

	// Each team's policy, share and usage; the admin gives acme a weight of 3.
	browse(t, tab, "the teams",
		chromedp.Navigate(c.url+"/ui/teams"),
		chromedp.WaitVisible(`#teams tr[data-team="cluster"]`),
		chromedp.WaitVisible(`#usage-chart svg.chart polyline`),
		chromedp.Click(`#teams tr[data-team="cluster"] button`),
		chromedp.WaitVisible(`#policy-form`),
		chromedp.SetValue(`#policy-form input[name="weight"]`, "3"),
		chromedp.SetValue(`#policy-form input[name="maxPriority"]`, "500"),
		chromedp.Click(`#policy-form button[type=submit]`),
		chromedp.WaitNotPresent(`#policy-form`),
		chromedp.WaitVisible(`//table[@id="teams"]//tr[@data-team="cluster"]/td[@data-field="weight"][.="3"]`))
	var teams []api.TeamView
	admin.must(http.MethodGet, "/api/v2/admin/teams", nil, http.StatusOK, &teams)
	for _, team := range teams {
		if team.Name == "cluster" && (team.Policy.Weight != 3 || team.Policy.MaxPriority == nil || *team.Policy.MaxPriority != 500 || team.Policy.MaxRunning != nil) {
			t.Fatalf("acme's policy after the page's change: %+v", team.Policy)
		}
	}
	screenshot(t, tab, "admin-teams")

	// A viewer's token reads, and is shown nothing it may not do.
	viewer := tokenOf("viewer")
	look := newTab(t, tab)
	browse(t, look, "a viewer's jobs",
		chromedp.Navigate(c.url+"/ui/jobs#token="+viewer),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-job="%s"]`, made.ID)),
		chromedp.WaitVisible(`//span[@id="who"][contains(., "(viewer)")]`))
	if n := value(t, look, "checkboxes", chromedp.Evaluate[int](`[...document.querySelectorAll("main button, tbody input[type=checkbox]")].filter((e) => e.offsetParent).length`)); n != 0 {
		t.Errorf("a viewer's jobs screen shows %d buttons or boxes", n)
	}
	screenshot(t, look, "jobs-viewer")
	browse(t, look, "a viewer's job page",
		chromedp.Navigate(c.url+"/ui/jobs/"+made.ID),
		chromedp.WaitVisible(`h1 .badge[data-status="finished"]`))
	if n := value(t, look, "actions", chromedp.Evaluate[int](`document.querySelectorAll("h1 button, #retag").length`)); n != 0 {
		t.Errorf("a viewer's job page shows %d actions", n)
	}
	browse(t, look, "a viewer's templates", chromedp.Navigate(c.url+"/ui/templates"), chromedp.WaitVisible(`tbody tr`))
	if n := value(t, look, "the upload", chromedp.Evaluate[int](`document.querySelectorAll("#template-file").length`)); n != 0 {
		t.Error("a viewer is offered a template upload")
	}

	// A manager issues its team a viewer's token from the page.
	manager := tokenOf("manager")
	run := newTab(t, tab)
	browse(t, run, "a manager's tokens",
		chromedp.Navigate(c.url+"/ui/library#token="+manager),
		chromedp.WaitVisible(`#tokens`),
		chromedp.SetValue(`#token-role`, "viewer"),
		chromedp.Click(`#tokens button[type=submit]`),
		chromedp.WaitVisible(`#new-token code`))
	issued := value(t, run, "the new token", chromedp.Evaluate[string](`document.querySelector("#new-token code").textContent`))
	var who struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}
	(&client{c: c, token: issued}).must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, &who)
	if who.Name != "cluster" || who.Role != "viewer" {
		t.Fatalf("the token the manager issued from the page: %+v", who)
	}
}
