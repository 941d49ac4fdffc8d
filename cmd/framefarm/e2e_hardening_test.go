package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence/porttest"
)

// closedBy reports whether the server closes conn (or answers and closes) within d.
func closedBy(t *testing.T, conn net.Conn, d time.Duration) bool {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	var netErr net.Error
	return !(errors.As(err, &netErr) && netErr.Timeout())
}

// waitForASlot returns once a new connection from this address is served rather than refused
// over the cap: connections the client closed count until the server notices they closed.
func waitForASlot(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: framefarm\r\nConnection: close\r\n\r\n"))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if strings.Contains(line, " 200 ") {
			return
		}
	}
	t.Fatal("closed connections still count against the cap after 10s")
}

// TestSlowClientsAreCut: a connection that sends nothing, half its headers, or an API body too
// slowly is closed; a slow upload under /files/ has its longer allowance; one address cannot
// hold more connections than the cap.
func TestSlowClientsAreCut(t *testing.T) {
	c := startCoordinator(t, options{slots: 0, config: `
[http]
header_timeout = "1s"
request_timeout = "1s"
transfer_timeout = "30s"
max_conns_per_ip = 3
`})
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	// The cap: a fourth connection from the same address is refused at once.
	held := []net.Conn{dial(), dial(), dial()}
	extra := dial()
	if line, _ := bufio.NewReader(extra).ReadString('\n'); !strings.Contains(line, "429") {
		t.Fatalf("the connection over the cap got %q", line)
	}
	for _, conn := range append(held, extra) {
		conn.Close()
	}
	waitForASlot(t, c.addr)

	silent := dial()
	half := dial()
	half.Write([]byte("GET /healthz HTTP/1.1\r\nHost: framefarm\r\n"))
	if !closedBy(t, silent, 10*time.Second) {
		t.Fatal("a connection that sends nothing is still open after 10s")
	}
	if !closedBy(t, half, 10*time.Second) {
		t.Fatal("a connection that sent half its headers is still open after 10s")
	}

	// An API body trickling in slower than request_timeout is cut.
	acme := c.team("acme")
	slowAPI := dial()
	slowAPI.Write([]byte("POST /api/v2/jobs HTTP/1.1\r\nHost: framefarm\r\nAuthorization: Bearer " + acme.token +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"template\""))
	if !closedBy(t, slowAPI, 10*time.Second) {
		t.Fatal("an API body slower than request_timeout kept its connection")
	}

	// A template upload that pauses longer than the header and request timeouts goes through.
	var tpl templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Slow"}, http.StatusCreated, &tpl)
	body := templateZip(t, inspection())
	u, err := url.Parse(tpl.UploadInfo.URL)
	if err != nil {
		t.Fatal(err)
	}
	upload := dial()
	upload.Write([]byte("PUT " + u.RequestURI() + " HTTP/1.1\r\nHost: framefarm\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n"))
	upload.Write(body[:len(body)/2])
	time.Sleep(1500 * time.Millisecond) // longer than header_timeout and request_timeout
	upload.Write(body[len(body)/2:])
	upload.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(upload).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("the slow upload got %q %v", line, err)
	}
	c.waitFor("template", tpl.ID, "uploaded")
}

// TestMetricsTokenAndListener: /metrics asks for its token when one is set, and moves to its
// own listener when [metrics] listen is set.
func TestMetricsTokenAndListener(t *testing.T) {
	metricsGet := func(u, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK && !strings.Contains(string(page), "framefarm_http_request_duration_seconds") {
			t.Fatalf("%s answered 200 without the metrics", u)
		}
		return resp.StatusCode
	}
	c := startCoordinator(t, options{slots: 0, config: "\n[metrics]\ntoken = \"scrape-me\"\n"})
	if code := metricsGet(c.url+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code := metricsGet(c.url+"/metrics", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code := metricsGet(c.url+"/metrics", "scrape-me"); code != http.StatusOK {
		t.Fatalf("token: %d", code)
	}

	addr := porttest.FreeAddr(t)
	c = startCoordinator(t, options{slots: 0, config: "\n[metrics]\ntoken = \"scrape-me\"\nlisten = \"" + addr + "\"\n"})
	if code := metricsGet(c.url+"/metrics", "scrape-me"); code != http.StatusNotFound {
		t.Fatalf("the API's port still serves metrics: %d", code)
	}
	if code := metricsGet("http://"+addr+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("own listener without the token: %d", code)
	}
	if code := metricsGet("http://"+addr+"/metrics", "scrape-me"); code != http.StatusOK {
		t.Fatalf("own listener: %d", code)
	}
}

// TestSecretsNeverLeakFromFailures: a secret used in a webhook URL and header, an asset's src and
// an upload target, each of which fails, appears in no job log, no job error, no server log line
// and nowhere in the database file.
func TestSecretsNeverLeakFromFailures(t *testing.T) {
	const secret = "hunter2-s3cr3t-value"
	c := startCoordinator(t, options{slots: 1, realEngines: true})
	acme := c.team("acme")
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "tok", "value": secret}, http.StatusCreated, nil)
	tpl := acme.uploadTemplateFile("zip", fixtureZip(t, "lottie/synthetic"))
	closed := "http://" + porttest.FreeAddr(t) // nothing listens there
	files := newFileServer(t, map[string][]byte{})
	still := func(extra map[string]any, assets ...map[string]any) string {
		body := kenburnsJob(tpl.ID, assets...)
		body["settings"] = map[string]any{"type": "image", "frames": 0}
		for k, v := range extra {
			body[k] = v
		}
		var cr created
		acme.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &cr)
		return cr.ID
	}
	webhookJob := still(map[string]any{"webhook": map[string]any{"url": closed + "/hook/${secret.tok}?t=${secret.tok}",
		"headers": map[string]string{"X-Token": "${secret.tok}"}}})
	srcJob := still(nil, map[string]any{"type": "image", "layerName": "Photo", "src": files + "/missing/${secret.tok}.jpg?t=${secret.tok}"})
	uploadJob := still(map[string]any{"upload": map[string]any{"provider": "s3", "params": map[string]any{
		"endpoint": closed + "/${secret.tok}", "region": "us-east-1", "bucket": "b-${secret.tok}",
		"accessKeyId": "AKID", "accessKeySecret": "${secret.tok}"}}})

	c.waitJob(webhookJob, "finished")
	c.waitFor("webhook", webhookJob, "failed")
	c.waitJob(srcJob, "error")
	c.waitJob(uploadJob, "error")
	for _, id := range []string{webhookJob, srcJob, uploadJob} {
		_, logs, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+id+"/logs", nil)
		_, record, _ := acme.call(http.MethodGet, "/api/v2/jobs/"+id, nil)
		if strings.Contains(string(logs), secret) || strings.Contains(string(record), secret) {
			t.Errorf("job %s shows the secret:\n%s\n%s", id, logs, record)
		}
		// Where a message quoted the value, it now names the secret instead.
		if id != srcJob && !strings.Contains(string(logs), "${secret.tok}") {
			t.Errorf("job %s's log does not say where the secret was:\n%s", id, logs)
		}
	}
	c.stop()
	if strings.Contains(c.stderr.String(), secret) {
		t.Error("the server log shows the secret")
	}
	db, err := os.ReadFile(filepath.Join(c.dataDir(), "framefarm.db"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(db), secret) {
		t.Error("the database file holds the secret in clear")
	}
}

// TestTemplateWorkAndStorageAreBounded: downloads and inspections take turns on the configured
// workers; a team gets 429 past its templates in flight and 413 past its bytes, each saying
// which limit it hit; another team is not held back.
func TestTemplateWorkAndStorageAreBounded(t *testing.T) {
	file := templateZip(t, inspection())
	release := make(chan struct{})
	var mu sync.Mutex
	var events []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		events = append(events, "start "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/first.zip" {
			<-release
		}
		w.Write(file)
		mu.Lock()
		events = append(events, "end "+r.URL.Path)
		mu.Unlock()
	}))
	defer srv.Close()
	c := startCoordinator(t, options{slots: 0, config: fmt.Sprintf(`
[templates]
workers = 1
max_in_flight_per_team = 2
max_bytes_per_team = %d
`, 2*len(file)+100)})
	acme, other := c.team("acme"), c.team("other")
	fromSrc := func(cl *client, path string) templateAnswer {
		var tpl templateAnswer
		cl.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": path, "src": srv.URL + path}, http.StatusCreated, &tpl)
		return tpl
	}
	first := fromSrc(acme, "/first.zip")
	second := fromSrc(acme, "/second.zip")
	e := acme.fails(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "third", "src": srv.URL + "/third.zip"},
		http.StatusTooManyRequests, "quota_exceeded")
	if !strings.Contains(e.Error, "max_in_flight_per_team") {
		t.Fatalf("429 without the limit: %s", e.Error)
	}
	var awaiting templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "upload"}, http.StatusCreated, &awaiting)
	acme.put(awaiting.UploadInfo.URL, file, http.StatusTooManyRequests)
	// Another team is not held back by acme's quota (its download waits for a worker).
	third := fromSrc(other, "/other.zip")

	close(release)
	for _, tpl := range []templateAnswer{first, second, third} {
		c.waitFor("template", tpl.ID, "uploaded")
	}
	mu.Lock()
	order := strings.Join(events, ", ")
	mu.Unlock()
	// One worker: each download ended before the next began.
	for i := 0; i+1 < len(events); i += 2 {
		if !strings.HasPrefix(events[i], "start ") || events[i+1] != "end "+strings.TrimPrefix(events[i], "start ") {
			t.Fatalf("downloads overlapped with one worker: %s", order)
		}
	}
	// Two files stored: the third would pass acme's bytes.
	if answer := acme.put(awaiting.UploadInfo.URL, file, http.StatusRequestEntityTooLarge); !strings.Contains(answer, "max_bytes_per_team") {
		t.Fatalf("413 without the limit: %s", answer)
	}
	code, body, _ := acme.call(http.MethodGet, "/api/v2/templates/"+awaiting.ID, nil)
	if code != http.StatusOK || !strings.Contains(string(body), "awaiting_upload") {
		t.Fatalf("a refused upload changed the template: %s", body)
	}
}
