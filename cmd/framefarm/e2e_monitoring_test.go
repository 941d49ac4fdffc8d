package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence/porttest"
)

// prometheusServer is a real Prometheus (Debian's package) run by a test.
type prometheusServer struct {
	t   *testing.T
	url string
}

// startPrometheus runs Prometheus scraping targets every second with the monitoring kit's rules,
// evaluated every second.
func startPrometheus(t *testing.T, targets []string) *prometheusServer {
	t.Helper()
	binary, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (make test installs Debian's prometheus package)")
	}
	rules, err := filepath.Abs("../../deploy/prometheus/framefarm-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, target := range targets {
		quoted[i] = fmt.Sprintf("%q", target)
	}
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - %q\n"+
		"scrape_configs:\n  - job_name: framefarm\n    static_configs:\n      - targets: [%s]\n", rules, strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := porttest.FreeAddr(t)
	startProcess(t, "prometheus", exec.Command(binary, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr))
	p := &prometheusServer{t: t, url: "http://" + addr}
	pollUntil(p.t, "prometheus is ready", func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// api reads one of Prometheus's API answers into data.
func (p *prometheusServer) api(path string, data any) {
	p.t.Helper()
	resp, err := http.Get(p.url + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	answer := struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}{}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Status != "success" {
		p.t.Fatalf("prometheus %s: %s %v", path, answer.Error, err)
	}
	if err := json.Unmarshal(answer.Data, data); err != nil {
		p.t.Fatal(err)
	}
}

// samples is how many samples a query returns now.
func (p *prometheusServer) samples(query string) int {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	p.api("/api/v1/query?query="+url.QueryEscape(query), &data)
	if data.ResultType == "scalar" {
		return 1
	}
	return len(data.Result)
}

// firing reports whether an alert of that name fires.
func (p *prometheusServer) firing(name string) bool {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	p.api("/api/v1/alerts", &data)
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name && a.State == "firing" {
			return true
		}
	}
	return false
}

// kitQueries are every recording rule of the monitoring kit and every query of its dashboard.
func kitQueries(t *testing.T) []string {
	// The rules file is YAML (promtool checks it); its record names are read line by line.
	data, err := os.ReadFile("../../deploy/prometheus/framefarm-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var queries []string
	for _, line := range strings.Split(string(data), "\n") {
		if record, ok := strings.CutPrefix(strings.TrimSpace(line), "- record: "); ok {
			queries = append(queries, record)
		}
	}
	var dashboard struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, err = os.ReadFile("../../deploy/grafana/framefarm.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatal(err)
	}
	for _, panel := range dashboard.Panels {
		for _, target := range panel.Targets {
			queries = append(queries, target.Expr)
		}
	}
	return queries
}

// TestARealPrometheusWatchesTheFarm: Prometheus scrapes three replicas and two render nodes'
// farm while it renders, with jobs failing and webhooks given up; every recording rule of the
// kit and every query of its dashboard returns data, none of its alerts fires while the farm is
// well, and killing a render node fires FramefarmRenderNodeLost.
func TestARealPrometheusWatchesTheFarm(t *testing.T) {
	rs := newReplicaSet(t, 3, testTimings)
	rs.start()
	leader := rs.leader()
	var renders atomic.Int64
	rs.members[0].control.answerAll(func(*renderCall) renderReply { // the nodes' renderer asks the first member
		if renders.Add(1)%4 == 0 {
			return renderReply{Result: "fail", Message: "the test fails every fourth render"}
		}
		return renderReply{Result: "finish"}
	})
	lost := rs.startNode("n1")
	rs.startNode("n2")
	var targets []string
	for _, c := range rs.members {
		u, err := url.Parse(c.metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u.Host)
	}
	prom := startPrometheus(t, targets)
	// Counters are read as increases from their first scrape: the load starts once every replica
	// has been scraped.
	pollUntil(t, "prometheus scrapes every replica", func() bool { return prom.samples(`up{job="framefarm"} == 1`) == len(targets) })

	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(refusing.Close)
	taking := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(taking.Close)
	acme := leader.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var ids []string
	for i := range 24 {
		body := renderJob(tplID)
		body["webhook"] = map[string]any{"url": []string{taking.URL, refusing.URL}[i%2]}
		var made created
		acme.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &made)
		ids = append(ids, made.ID)
	}
	for _, id := range ids {
		leader.waitUntil("job "+id+" ends", func() bool {
			status := acme.job(id).Status
			return status == "finished" || status == "error"
		})
	}

	queries := kitQueries(t)
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(250 * time.Millisecond) {
		var empty []string
		for _, q := range queries {
			if prom.samples(q) == 0 {
				empty = append(empty, q)
			}
		}
		if len(empty) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d queries of the kit return no data:\n%s", len(empty), len(queries), strings.Join(empty, "\n"))
		}
	}
	for _, alert := range []string{"FramefarmNoLeader", "FramefarmReplicaBehind", "FramefarmRenderNodeLost", "FramefarmBucketErrors", "FramefarmDiskFilling"} {
		if prom.firing(alert) {
			t.Errorf("%s fires on a well farm", alert)
		}
	}
	pollUntil(t, "webhook deliveries gave up: FramefarmWebhooksFailing fires", func() bool { return prom.firing("FramefarmWebhooksFailing") })

	lost.kill()
	pollUntil(t, "killing a render node fires FramefarmRenderNodeLost", func() bool { return prom.firing("FramefarmRenderNodeLost") })
}

// TestTheKitsRulesPassTheirTests: promtool (Debian's prometheus package) checks the rules and
// runs their tests, deploy/prometheus/framefarm-rules.test.yml.
func TestTheKitsRulesPassTheirTests(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (make test installs Debian's prometheus package)")
	}
	for _, args := range [][]string{{"check", "rules", "framefarm-rules.yml"}, {"test", "rules", "framefarm-rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../deploy/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
