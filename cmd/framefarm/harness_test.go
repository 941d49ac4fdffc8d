package main

// The end-to-end harness: each test runs a real `framefarm serve` as a separate process (this test
// binary, re-executed) on 127.0.0.1 with its own data directory, and talks to it over HTTP. The
// process prints a signal line after every durable transition, so tests wait on events, never on
// timers.

import (
	"archive/zip"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/actors/signals"
	"github.com/framefarm/framefarm/persistence/porttest"
	"github.com/framefarm/framefarm/persistence/s3store/s3test"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/aerender/aerendertest"
)

// envRun makes this test binary run as framefarm itself, with the test plugins.
const envRun = "FRAMEFARM_E2E_RUN"

func TestMain(m *testing.M) {
	if plan := os.Getenv(envStranger); plan != "" {
		os.Exit(strangerMain(plan))
	}
	if os.Getenv(envRun) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, testPlugins())
		stop()
		os.Exit(code)
	}
	os.Exit(runWithObjects(m))
}

// envObjects set to s3 runs every coordinator of the suite with its files in a bucket of one
// SeaweedFS server the suite starts (make test runs the suite once with each backend).
const envObjects = "FRAMEFARM_TEST_OBJECTS"

// bucket is the suite's SeaweedFS when envObjects is s3.
var bucket *s3test.Server

func runWithObjects(m *testing.M) int {
	if os.Getenv(envObjects) != "s3" {
		return m.Run()
	}
	weed := os.Getenv(s3test.EnvWeed)
	if weed == "" {
		fmt.Fprintf(os.Stderr, "%s=s3 needs $%s, the SeaweedFS binary make test builds\n", envObjects, s3test.EnvWeed)
		return 2
	}
	dir, err := os.MkdirTemp("", "framefarm-bucket-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	if bucket, err = s3test.Launch(weed, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer bucket.Stop()
	return m.Run()
}

// bucketConfig is the [objects] table of a coordinator whose files go to the suite's bucket,
// under a prefix of its own.
func bucketConfig(prefix string) string {
	if bucket == nil {
		return ""
	}
	return s3Config(bucket, "s3", prefix)
}

// s3Config is an [objects] table of backend naming srv's bucket in [objects.s3], under prefix,
// with parts of 5 MiB (the least S3 takes).
func s3Config(srv *s3test.Server, backend, prefix string) string {
	return s3ConfigVia(srv, srv.Endpoint, backend, prefix)
}

// s3ConfigVia is s3Config reaching srv through endpoint (a gate).
func s3ConfigVia(srv *s3test.Server, endpoint, backend, prefix string) string {
	return fmt.Sprintf("\n[objects]\nbackend = %q\n\n[objects.s3]\nendpoint = %q\nbucket = %q\npath_style = true\naccess_key_id = %q\nsecret_access_key = %q\nprefix = %q\npart_size = %d\n",
		backend, endpoint, srv.Bucket, srv.AccessKey, srv.SecretKey, prefix+"/", 5<<20)
}

// testBucket is an S3 server for a test of the s3 backend: the suite's when it runs with one,
// else one of its own (the test is skipped without $FRAMEFARM_WEED; make test sets it).
func testBucket(t testing.TB) *s3test.Server {
	if bucket != nil {
		return bucket
	}
	return s3test.Start(t)
}

// waitLimit bounds a wait of the end-to-end tests for something that gives no signal, or the
// time without one while a wait for a signal goes on.
const waitLimit = time.Minute

// waitOuterLimit bounds a wait that keeps seeing signals.
const waitOuterLimit = 10 * time.Minute

const adminToken = "test-admin-token"

type options struct {
	slots int
	// rateLimit replaces the body of the [ratelimit] table.
	rateLimit string
	// webhookBackoff replaces webhooks.retry_backoff.
	webhookBackoff string
	// logLevel replaces log.level (debug by default: failing tests print the log).
	logLevel string
	// noJobSignals keeps the process from printing job transitions (benchmarks).
	noJobSignals bool
	// config is TOML appended to the harness's configuration (tables it does not set).
	config string
	// realEngines runs the production engines: Lottie, ffmpeg, and After Effects (ae2025)
	// through the stand-in aerender.
	realEngines bool
	// cluster adds a [cluster] table on fixed loopback ports (kept across restarts), so render
	// node processes can join; heartbeat and lease replace its test timings (200ms, 1500ms).
	// Members use certificates of a farm CA made by `framefarm cluster tls`, unless insecure.
	cluster          bool
	heartbeat, lease string
	insecure         bool
	// cpus pins the process to these CPUs with taskset (as a container's CPU limit would), so
	// Go sizes GOMAXPROCS to them.
	cpus string
	// metricsListen moves /metrics to a listener of its own, so reading it adds nothing to the
	// API port's traffic.
	metricsListen bool
	// pki, with cluster, is a folder holding the farm's CA and a coordinator's certificate to
	// use (replicas share them); empty: the coordinator makes its own.
	pki string
	// publicURL is server.public_url (replicas: the balancer in front of them).
	publicURL string
	// clusterHost, with cluster, is the address the cluster's ports bind (127.0.0.1 unless set:
	// one of a network the test made).
	clusterHost string
}

// coordinator is one framefarm process under test (and its restarts).
type coordinator struct {
	t       testing.TB
	dir     string
	addr    string
	url     string
	opts    options
	control *renderControl
	cmd     *exec.Cmd
	exited  chan error
	stderr  *lockedBuffer
	// stdout holds what the process printed besides its signals.
	stdout *lockedBuffer

	// Board holds the signals below; each wakes those waiting.
	signals.Board
	jobs      map[string]map[string]bool
	templates map[string]map[string]bool
	webhooks  map[string]map[string]bool
	progress  map[string]map[string]bool
	nodes     map[string]map[string]bool
	fenced    map[string]map[string]bool
	// duties are a replica's terms: "leading", then "following" once it dropped them.
	duties map[string]map[string]bool
	// waits are the engines whose reasons for jobs to wait were recorded.
	waits map[string]map[string]bool
	// counts counts the signals of each "kind id state".
	counts map[string]int
	// firstSignal is when the first signal of each kind and id arrived ("progress id").
	firstSignal map[string]time.Time
	// gossip and actors are the cluster addresses (cluster option); pki is the folder of the
	// farm's CA and certificates.
	gossip, actors string
	pki            string
	// env is added to the process's environment at its next launches.
	env []string
	// metricsURL is where /metrics is served: the API's address unless metricsListen.
	metricsURL string
	// debugAddr serves Go's profiles when set (profiled).
	debugAddr string
	// binary is the program the process runs: this test binary unless set (another release's).
	binary string
	// listening is the address the process listens on while it runs, nil while it does not:
	// what a goroutine other than the test's (a balancer) may read.
	listening atomic.Pointer[string]
}

func startCoordinator(t testing.TB, opts options) *coordinator {
	t.Helper()
	c := newCoordinator(t, opts)
	c.launch("127.0.0.1:0")
	return c
}

// newCoordinator prepares a coordinator's directory and configuration without starting it.
func newCoordinator(t testing.TB, opts options) *coordinator {
	t.Helper()
	c := &coordinator{
		t: t, dir: t.TempDir(), opts: opts, control: newRenderControl(t), stderr: &lockedBuffer{}, stdout: &lockedBuffer{},
		jobs: map[string]map[string]bool{}, templates: map[string]map[string]bool{},
		webhooks: map[string]map[string]bool{}, progress: map[string]map[string]bool{}, firstSignal: map[string]time.Time{},
		nodes: map[string]map[string]bool{}, fenced: map[string]map[string]bool{}, counts: map[string]int{},
		duties: map[string]map[string]bool{},
		waits:  map[string]map[string]bool{},
	}
	if opts.logLevel == "" {
		opts.logLevel = "debug"
	}
	if opts.webhookBackoff == "" {
		opts.webhookBackoff = `["20ms", "40ms", "80ms"]`
	}
	if opts.rateLimit == "" {
		opts.rateLimit = "requests_per_second = 100000\nburst = 100000"
	}
	publicURL := ""
	if opts.publicURL != "" {
		publicURL = fmt.Sprintf("public_url = %q\n", opts.publicURL)
	}
	cfg := fmt.Sprintf(`
[server]
admin_token = %q
allow_private_urls = true
shutdown_timeout = "10s"
`+publicURL+`
[log]
level = %q

[ratelimit]
%s

[webhooks]
retry_backoff = %s
timeout = "2s"
`, adminToken, opts.logLevel, opts.rateLimit, opts.webhookBackoff) + opts.config
	if !strings.Contains(opts.config, "[objects]") {
		cfg += bucketConfig(filepath.Base(c.dir))
	}
	if opts.metricsListen {
		addr := porttest.FreeAddr(t)
		c.metricsURL = "http://" + addr
		cfg += fmt.Sprintf("\n[metrics]\nlisten = %q\n", addr)
	}
	if opts.cluster {
		if opts.heartbeat == "" {
			opts.heartbeat, opts.lease = "200ms", "1500ms"
		}
		c.gossip, c.actors = porttest.FreeAddr(t), porttest.FreeAddr(t)
		if opts.clusterHost != "" {
			c.gossip, c.actors = onHost(opts.clusterHost, c.gossip), onHost(opts.clusterHost, c.actors)
		}
		cfg += fmt.Sprintf("\n[cluster]\nbind = %q\nactors_bind = %q\nkey = %q\nheartbeat_interval = %q\nlease = %q\n",
			c.gossip, c.actors, clusterKey, opts.heartbeat, opts.lease)
		if opts.insecure {
			cfg += "insecure = true\n"
		} else {
			c.pki = opts.pki
			if c.pki == "" {
				c.pki = filepath.Join(c.dir, "pki")
				tlsCommand(t, "ca", "create", "--dir", c.pki)
				tlsCommand(t, "cert", "create", "--coordinator", "--dir", c.pki)
			}
			cfg += fmt.Sprintf("\n[cluster.tls]\ncert_file = %q\nkey_file = %q\nca_file = %q\n",
				filepath.Join(c.pki, "coordinator.pem"), filepath.Join(c.pki, "coordinator-key.pem"), filepath.Join(c.pki, "farm-ca.pem"))
		}
	}
	if opts.realEngines {
		worker, err := filepath.Abs("../../renderer/lottie/worker")
		if err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("\n[engines]\nlottie_worker = %q\nfonts_dir = %q\n\n[engines.ae2025]\naerender = %q\n",
			worker, filepath.Join(c.dir, "fonts"), aerendertest.BuildStandIn(t))
	}
	if err := os.WriteFile(filepath.Join(c.dir, "framefarm.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.kill()
		if log := c.stderr.String(); strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("the coordinator process reported a data race:\n%s", log[strings.Index(log, "WARNING: DATA RACE"):])
		}
		if t.Failed() {
			t.Logf("coordinator log:\n%s", c.stderr.tail(200))
		}
	})
	return c
}

// launch starts the process and waits until it listens.
func (c *coordinator) launch(listen string) {
	c.t.Helper()
	args := []string{cmp.Or(c.binary, os.Args[0]), "serve", "--config", filepath.Join(c.dir, "framefarm.toml"),
		"--data-dir", c.dataDir(), "--listen", listen, "--local-slots", fmt.Sprint(c.opts.slots)}
	if c.opts.cpus != "" {
		args = append([]string{"taskset", "-c", c.opts.cpus}, args...)
	}
	cmd := dieWithTheTest(exec.Command(args[0], args[1:]...))
	cmd.Env = append(append(os.Environ(), envRun+"=1", envControl+"="+c.control.url), c.env...)
	if c.opts.noJobSignals {
		cmd.Env = append(cmd.Env, envJobSignals+"=0")
	}
	if c.opts.realEngines {
		cmd.Env = append(cmd.Env, envRealEngines+"=1")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmd, c.exited = cmd, make(chan error, 1)
	listening := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			if addr, ok := strings.CutPrefix(line, "framefarm listening on "); ok {
				listening <- addr
			}
			if fields := strings.Fields(line); len(fields) == 4 && fields[0] == "ffsignal" {
				c.signal(fields[1], fields[2], fields[3])
			} else {
				c.stdout.Write([]byte(line + "\n"))
			}
		}
		c.exited <- cmd.Wait()
	}()
	select {
	case addr := <-listening:
		c.addr, c.url = addr, "http://"+addr
		c.listening.Store(&addr)
		if !c.opts.metricsListen {
			c.metricsURL = c.url
		}
	case err := <-c.exited:
		c.t.Fatalf("coordinator exited before listening: %v\n%s", err, c.stderr.tail(50))
	case <-time.After(waitLimit):
		c.t.Fatalf("coordinator did not listen within %s\n%s", waitLimit, c.stderr.tail(50))
	}
}

func (c *coordinator) dataDir() string { return filepath.Join(c.dir, "data") }

// onHost is addr's port on host.
func onHost(host, addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort(host, port)
}

func (c *coordinator) signals(kind string) map[string]map[string]bool {
	switch kind {
	case "template":
		return c.templates
	case "webhook":
		return c.webhooks
	case "progress":
		return c.progress
	case "node":
		return c.nodes
	case "fenced":
		return c.fenced
	case "duties":
		return c.duties
	case "waits":
		return c.waits
	}
	return c.jobs
}

func (c *coordinator) signal(kind, id, state string) {
	c.Note(func() {
		m := c.signals(kind)
		if m[id] == nil {
			m[id] = map[string]bool{}
			c.firstSignal[kind+" "+id] = time.Now()
		}
		m[id][state] = true
		c.counts[kind+" "+id+" "+state]++
	})
}

// tlsCommand runs `framefarm cluster tls ...` and fails the test if it fails.
func tlsCommand(t testing.TB, args ...string) {
	t.Helper()
	if out, err := framefarm(append([]string{"cluster", "tls"}, args...)...); err != nil {
		t.Fatalf("cluster tls %v: %v\n%s", args, err, out)
	}
}

// nodeTLS makes the certificate of a node of the farm and returns the flags that use it.
func (c *coordinator) nodeTLS(id string) []string {
	c.t.Helper()
	if c.opts.insecure {
		return []string{"--insecure"}
	}
	if _, err := os.Stat(filepath.Join(c.pki, "node-"+id+".pem")); err != nil {
		tlsCommand(c.t, "cert", "create", "--node", id, "--dir", c.pki)
	}
	return []string{"--tls-cert", filepath.Join(c.pki, "node-"+id+".pem"), "--tls-key", filepath.Join(c.pki, "node-"+id+"-key.pem"),
		"--tls-ca", filepath.Join(c.pki, "farm-ca.pem")}
}

// framefarm runs a framefarm command (this binary with the test plugins) and returns its output.
func framefarm(args ...string) ([]byte, error) {
	cmd := dieWithTheTest(exec.Command(os.Args[0], args...))
	cmd.Env = append(os.Environ(), envRun+"=1")
	return cmd.CombinedOutput()
}

// startProcess starts a program the test needs beside its coordinators (a replica from a
// configuration of its own, Prometheus), killed when the test ends, its output kept and shown
// (named what) when the test failed.
func startProcess(t testing.TB, what string, cmd *exec.Cmd) {
	t.Helper()
	cmd = dieWithTheTest(cmd)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", what, log.tail(60))
		}
	})
}

// kill ends the process at once (SIGKILL): nothing is flushed, nothing is said goodbye.
func (c *coordinator) kill() {
	if c.cmd == nil || c.cmd.ProcessState != nil {
		return
	}
	c.listening.Store(nil)
	c.cmd.Process.Kill()
	<-c.exited
	c.cmd = nil
}

// stop asks the process to shut down (SIGTERM) and checks that it exits cleanly.
func (c *coordinator) stop() {
	c.t.Helper()
	c.listening.Store(nil)
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.exited:
		if err != nil {
			c.t.Fatalf("coordinator exit after SIGTERM: %v\n%s", err, c.stderr.tail(50))
		}
	case <-time.After(waitLimit):
		c.t.Fatal("coordinator did not stop after SIGTERM")
	}
	c.cmd = nil
}

// restart starts the process again on the same address and data directory, forgetting what
// the previous one signalled.
func (c *coordinator) restart() {
	c.t.Helper()
	c.Note(func() {
		for _, m := range []*map[string]map[string]bool{&c.jobs, &c.templates, &c.webhooks, &c.progress, &c.nodes, &c.fenced, &c.duties, &c.waits} {
			*m = map[string]map[string]bool{}
		}
	})
	c.launch(c.addr)
}

// pollUntil polls done every 100 ms until it holds, within waitLimit: for what no process
// signals (another program's state, a replica's applied index).
func pollUntil(t testing.TB, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); !done(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitLimit)
		}
	}
}

// waitUntil waits until cond, read under the lock, holds; each signal wakes it. It waits as
// long as the process keeps signalling (a render progressing on a loaded machine), and gives
// up after waitLimit without a signal, or after waitOuterLimit in all.
func (c *coordinator) waitUntil(what string, cond func() bool) {
	c.t.Helper()
	if !c.UntilQuiet(cond, waitLimit, waitOuterLimit) {
		c.t.Fatalf("%s did not happen (%s without a signal, or %s in all)\n%s", what, waitLimit, waitOuterLimit, c.stderr.tail(40))
	}
}

// waitFor waits until the signalled states of an id include one of states, and returns it.
func (c *coordinator) waitFor(kind, id string, states ...string) string {
	c.t.Helper()
	var reached string
	c.waitUntil(fmt.Sprintf("%s %s reaching %v", kind, id, states), func() bool {
		for _, state := range states {
			if c.signals(kind)[id][state] {
				reached = state
				return true
			}
		}
		return false
	})
	return reached
}

// waitCount waits until an id was signalled in state n times.
func (c *coordinator) waitCount(kind, id, state string, n int) {
	c.t.Helper()
	c.waitUntil(fmt.Sprintf("%s %s reaching %s %d times", kind, id, state, n), func() bool { return c.counts[kind+" "+id+" "+state] >= n })
}

func (c *coordinator) waitJob(id, state string) { c.t.Helper(); c.waitFor("job", id, state) }

// waitNode waits until a node has been in a state.
func (c *coordinator) waitNode(id string, state actors.NodeState) {
	c.t.Helper()
	c.waitFor("node", id, string(state))
}

// waitFirst waits for the first signal of a kind about id and returns when it arrived.
func (c *coordinator) waitFirst(kind, id string) time.Time {
	c.t.Helper()
	var at time.Time
	c.waitUntil(fmt.Sprintf("a %s signal for %s", kind, id), func() (ok bool) {
		at, ok = c.firstSignal[kind+" "+id]
		return ok
	})
	return at
}

// client calls the API with one token.
type client struct {
	c     *coordinator
	token string
}

// team makes a team (named after the test when empty) and a client holding a token for it.
func (c *coordinator) team(name string) *client {
	c.t.Helper()
	admin := &client{c: c, token: adminToken}
	var out struct {
		Token string `json:"token"`
	}
	admin.must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": name}, http.StatusCreated, &out)
	return &client{c: c, token: out.Token}
}

// call makes one request; body is JSON-encoded unless it is already bytes.
func (cl *client) call(method, path string, body any) (int, []byte, http.Header) {
	cl.c.t.Helper()
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		reader = bytes.NewReader(b)
	case string:
		reader = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			cl.c.t.Fatal(err)
		}
		reader = bytes.NewReader(raw)
	}
	url := path
	if !strings.HasPrefix(path, "http") {
		url = cl.c.url + path
	}
	req, err := http.NewRequest(method, url, reader)
	if err != nil {
		cl.c.t.Fatal(err)
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cl.c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.c.t.Fatal(err)
	}
	return resp.StatusCode, data, resp.Header
}

// must makes a request, checks its status and decodes its JSON answer into out (if not nil).
func (cl *client) must(method, path string, body any, status int, out any) http.Header {
	cl.c.t.Helper()
	got, data, header := cl.call(method, path, body)
	if got != status {
		cl.c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			cl.c.t.Fatalf("%s %s: cannot decode %s: %v", method, path, data, err)
		}
	}
	return header
}

// apiError is an error answer.
type apiError struct {
	Error   string `json:"error"`
	Code    string `json:"code"`
	Details []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"details"`
}

// fails checks that a request fails with status and code, and returns the error.
func (cl *client) fails(method, path string, body any, status int, code string) apiError {
	cl.c.t.Helper()
	var e apiError
	cl.must(method, path, body, status, &e)
	if e.Code != code || e.Error == "" {
		cl.c.t.Fatalf("%s %s: code %q (%q), want %q", method, path, e.Code, e.Error, code)
	}
	return e
}

// Shapes of answers, as a client of the contract would read them.
type (
	templateAnswer struct {
		ID           string   `json:"id"`
		Status       string   `json:"status"`
		Compositions []string `json:"compositions"`
		Layers       []string `json:"layers"`
		Mogrt        *struct {
			Composition string `json:"composition"`
		} `json:"mogrt"`
		Error      *string `json:"error"`
		UploadInfo *struct {
			URL       string            `json:"url"`
			Method    string            `json:"method"`
			ExpiresIn float64           `json:"expiresIn"`
			Key       string            `json:"key"`
			Fields    map[string]string `json:"fields"`
		} `json:"uploadInfo"`
	}
	created struct {
		ID           string    `json:"id"`
		Status       string    `json:"status"`
		OutputURL    string    `json:"outputUrl"`
		Children     []created `json:"children"`
		MissingFonts []string  `json:"missingFonts"`
		Index        *int      `json:"index"`
	}
	job struct {
		ID         string  `json:"id"`
		Name       string  `json:"name"`
		TemplateID *string `json:"templateId"`
		Status     string  `json:"status"`
		Progress   float64 `json:"progress"`
		OutputURL  string  `json:"outputUrl"`
		Stats      struct {
			CreatedAt      string   `json:"createdAt"`
			StartedAt      *string  `json:"startedAt"`
			FinishedAt     *string  `json:"finishedAt"`
			ErrorAt        *string  `json:"errorAt"`
			TotalAssets    int      `json:"totalAssets"`
			RenderDuration *float64 `json:"renderDuration"`
			Error          *string  `json:"error"`
			WaitingFor     string   `json:"waitingFor"`
		} `json:"stats"`
		Assets       []map[string]any `json:"assets"`
		Composition  string           `json:"composition"`
		Settings     map[string]any   `json:"settings"`
		BatchID      string           `json:"batchId"`
		MissingFonts []string         `json:"missingFonts"`
		ParentID     string           `json:"parentId"`
		Children     []string         `json:"children"`
		Priority     int              `json:"priority"`
		Tags         []string         `json:"tags"`
		Attempts     int              `json:"attempts"`
		Node         string           `json:"node"`
		Data         json.RawMessage  `json:"data"`
		Chunks       []chunk          `json:"chunks"`
		ChunksRender *float64         `json:"chunksRenderDuration"`
		Unsplit      string           `json:"unsplit"`
		Pool         string           `json:"pool"`
		Limits       []string         `json:"limits"`
	}
	chunk struct {
		Index      int      `json:"index"`
		Frames     []int    `json:"frames"`
		Status     string   `json:"status"`
		Progress   float64  `json:"progress"`
		Node       string   `json:"node"`
		Attempts   int      `json:"attempts"`
		StartedAt  *string  `json:"startedAt"`
		FinishedAt *string  `json:"finishedAt"`
		Render     *float64 `json:"renderDuration"`
		Error      string   `json:"error"`
	}
)

func (cl *client) job(id string) job {
	cl.c.t.Helper()
	var j job
	cl.must(http.MethodGet, "/api/v2/jobs/"+id, nil, http.StatusOK, &j)
	return j
}

// inspection is a test template's content: compositions "main" (layers Title, Photo, Logo) and
// "outro" (layer Credits), rendered by the lottie engine.
func inspection() renderer.Inspection {
	return renderer.Inspection{
		Engines: []string{renderer.EngineLottie},
		Compositions: []renderer.Composition{
			{Name: "main", Width: 1920, Height: 1080, FPS: 30, Duration: 5, Layers: []renderer.Layer{
				{Index: 1, Name: "Title", Type: "text", Text: "Hello"}, {Index: 2, Name: "Photo", Type: "image"}, {Index: 3, Name: "Logo", Type: "image"},
			}},
			{Name: "outro", Width: 1920, Height: 1080, FPS: 30, Duration: 2, Layers: []renderer.Layer{{Index: 1, Name: "Credits", Type: "text"}}},
		},
	}
}

// templateZip builds a test template file.
func templateZip(t testing.TB, in renderer.Inspection) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	json.NewEncoder(w).Encode(in)
	zw.Close()
	return buf.Bytes()
}

// uploadTemplate creates a zip template with the given content and waits until it is uploaded.
func (cl *client) uploadTemplate(in renderer.Inspection) string {
	cl.c.t.Helper()
	var tpl templateAnswer
	cl.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Test"}, http.StatusCreated, &tpl)
	cl.put(tpl.UploadInfo.URL, templateZip(cl.c.t, in), http.StatusOK)
	cl.c.waitFor("template", tpl.ID, "uploaded")
	return tpl.ID
}

// put sends a file to a signed URL, expects status, and returns the answer's body.
func (cl *client) put(url string, data []byte, status int) string {
	cl.c.t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cl.c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		cl.c.t.Fatalf("PUT %s: status %d, want %d: %s", url, resp.StatusCode, status, body)
	}
	return string(body)
}

// get downloads a URL.
func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// renderJob is a POST /jobs body rendering composition main of a template.
func renderJob(templateID string, assets ...map[string]any) map[string]any {
	if assets == nil {
		assets = []map[string]any{}
	}
	return map[string]any{"template": map[string]any{"id": templateID, "composition": "main"}, "assets": assets}
}

// renderControl drives the test renderer: each step of each render is a call the test answers.
type renderControl struct {
	url   string
	calls chan *renderCall
	mu    sync.Mutex
	auto  func(*renderCall) renderReply
}

func newRenderControl(t testing.TB) *renderControl {
	rc := &renderControl{calls: make(chan *renderCall, 1000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := &renderCall{reply: make(chan renderReply, 1), gone: make(chan struct{})}
		if err := json.NewDecoder(r.Body).Decode(call); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		rc.mu.Lock()
		auto := rc.auto
		rc.mu.Unlock()
		var reply renderReply
		if auto != nil {
			reply = auto(call)
		} else {
			rc.calls <- call
			select {
			case reply = <-call.reply:
			case <-r.Context().Done():
				close(call.gone)
				return
			}
		}
		json.NewEncoder(w).Encode(reply)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

// answerAll makes every render step answer by itself from now on.
func (rc *renderControl) answerAll(f func(*renderCall) renderReply) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.auto = f
}

func finishAll(*renderCall) renderReply { return renderReply{Result: "finish"} }

// next waits for the next render step the test must answer.
func (rc *renderControl) next(t testing.TB) *renderCall {
	t.Helper()
	select {
	case call := <-rc.calls:
		return call
	case <-time.After(waitLimit):
		t.Fatalf("no render started within %s", waitLimit)
		return nil
	}
}

func (call *renderCall) answer(r renderReply) { call.reply <- r }

// webhookReceiver records the webhooks it receives and answers with the statuses it is given.
type webhookReceiver struct {
	url      string
	received chan receivedHook
	mu       sync.Mutex
	statuses []int
}

type receivedHook struct {
	Method string
	Header http.Header
	Body   []byte
}

func newWebhookReceiver(t testing.TB, statuses ...int) *webhookReceiver {
	wr := &webhookReceiver{received: make(chan receivedHook, 100), statuses: statuses}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wr.mu.Lock()
		status := http.StatusOK
		if len(wr.statuses) > 0 {
			status, wr.statuses = wr.statuses[0], wr.statuses[1:]
		}
		wr.mu.Unlock()
		wr.received <- receivedHook{Method: r.Method, Header: r.Header.Clone(), Body: body}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	wr.url = srv.URL
	return wr
}

func (wr *webhookReceiver) next(t testing.TB) receivedHook {
	t.Helper()
	select {
	case h := <-wr.received:
		return h
	case <-time.After(waitLimit):
		t.Fatalf("no webhook within %s", waitLimit)
		return receivedHook{}
	}
}

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// written is closed and replaced at every write, for waiters.
	written chan struct{}
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.buf.Write(p)
}

// waitFor waits until the text written contains one of texts, and returns it ("" at the limit).
func (b *lockedBuffer) waitFor(limit time.Duration, texts ...string) string {
	deadline := time.After(limit)
	for {
		b.mu.Lock()
		for _, text := range texts {
			if strings.Contains(b.buf.String(), text) {
				b.mu.Unlock()
				return text
			}
		}
		if b.written == nil {
			b.written = make(chan struct{})
		}
		written := b.written
		b.mu.Unlock()
		select {
		case <-written:
		case <-deadline:
			return ""
		}
	}
}

// lineWith is the first line holding text ("" when none does).
func (b *lockedBuffer) lineWith(text string) string {
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, text) {
			return line
		}
	}
	return ""
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) tail(lines int) string {
	all := strings.Split(b.String(), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// metrics reads the coordinator's /metrics: the value of each series, named with its labels as
// Prometheus writes them (name{label="value",...}).
func (c *coordinator) metrics() map[string]float64 {
	c.t.Helper()
	_, text := get(c.t, c.metricsURL+"/metrics")
	series := map[string]float64{}
	for line := range strings.Lines(string(text)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			c.t.Fatalf("metric %s: %v", name, err)
		}
		series[name] = v
	}
	return series
}

// traffic is what the coordinator received and sent on each of links (api, nodes, objects),
// read from one /metrics.
func (c *coordinator) traffic(links ...string) float64 {
	c.t.Helper()
	series, bytes := c.metrics(), 0.0
	for _, link := range links {
		bytes += series[`framefarm_network_bytes_total{direction="received",link="`+link+`"}`] +
			series[`framefarm_network_bytes_total{direction="sent",link="`+link+`"}`]
	}
	return bytes
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
