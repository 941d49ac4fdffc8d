package main

// Cluster benchmarks: a coordinator process with production cluster timings (heartbeat 1s,
// lease 5s) and simulated render nodes in this process (cluster/nodesim), which speak the real
// protocol over a real Proto.Actor remote connection and render by waiting. The killed-node
// benchmark uses real `framefarm node` processes and real membership.

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/nodesim"
	"github.com/framefarm/framefarm/cluster/remoting"
	"github.com/framefarm/framefarm/renderer"
)

func newClusterBenchFarm(b *testing.B) *benchFarm {
	c := startCoordinator(b, options{cluster: true, heartbeat: "1s", lease: "5s", logLevel: "warn", noJobSignals: true})
	cl := c.team("bench")
	f := &benchFarm{c: c, client: cl, tplID: cl.uploadTemplate(inspection())}
	f.body = []byte(fmt.Sprintf(`{"template":{"id":%q,"composition":"main"},"assets":[]}`, f.tplID))
	return f
}

// simulate starts simulated nodes against the farm's coordinator, from this process's one
// remote endpoint.
func (f *benchFarm) simulate(b *testing.B, cfg nodesim.Config) *nodesim.Simulator {
	b.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	// The simulated nodes share one certificate that any node id may use.
	if _, err := os.Stat(filepath.Join(f.c.pki, "node.pem")); err != nil {
		tlsCommand(b, "cert", "create", "--any-node", "--dir", f.c.pki)
	}
	e, err := remoting.Start(system, remoting.Options{Bind: "127.0.0.1:0", Self: certs.RoleNode, Accept: certs.RoleCoordinator,
		TLS: remoting.TLS{CertFile: filepath.Join(f.c.pki, "node.pem"), KeyFile: filepath.Join(f.c.pki, "node-key.pem"), CAFile: filepath.Join(f.c.pki, "farm-ca.pem")}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Shutdown(false) })
	cfg.Engines, cfg.Key = []string{renderer.EngineLottie}, []byte(clusterKey)
	sim, err := nodesim.Start(system, actor.NewPID(f.c.actors, actors.GatewayName), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sim.Stop)
	return sim
}

// createQueued creates n jobs in batches of up to 1000.
func (f *benchFarm) createQueued(b *testing.B, n int) {
	load := newLoadClient(f.c, f.client.token, 4)
	for n > 0 {
		size := min(n, 1000)
		if _, _, err := load.do(http.MethodPost, "/api/v2/batches", f.batchBody(size), http.StatusCreated); err != nil {
			b.Fatal(err)
		}
		n -= size
	}
}

// BenchmarkClusterAssignLatencyIdle: on an idle farm of 100 simulated single-slot nodes, the
// time from sending POST /jobs to the assignment arriving at a node, one job at a time.
func BenchmarkClusterAssignLatencyIdle(b *testing.B) {
	f := newClusterBenchFarm(b)
	arrived := make(chan string, 16)
	f.simulate(b, nodesim.Config{Prefix: "idle", Nodes: 100, SlotsPerNode: 1, Render: time.Millisecond,
		OnAssign: func(jobID string, _ int, _ time.Time) { arrived <- jobID }})
	load := newLoadClient(f.c, f.client.token, 1)
	lat := &latencies{}
	b.ResetTimer()
	for range 500 {
		started := time.Now()
		if _, _, err := load.do(http.MethodPost, "/api/v2/jobs", f.body, http.StatusCreated); err != nil {
			b.Fatal(err)
		}
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			b.Fatal("no assignment")
		}
		lat.add(time.Since(started))
	}
	lat.report(b)
	b.ReportMetric(serverQuantile(b, f.c, `code="201",method="POST",route="/api/v2/jobs"`, 0.99)*1000, "post-server-p99-ms")
}

// BenchmarkClusterThroughput: jobs queued beforehand (six per slot), then simulated nodes with
// 1 s renders join; assignments per second from the first assignment to the last render's end.
func BenchmarkClusterThroughput(b *testing.B) {
	for _, slots := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			f := newClusterBenchFarm(b)
			jobs := min(slots*6, 30000)
			f.createQueued(b, jobs)
			var mu sync.Mutex
			var first, last time.Time
			all := make(chan struct{})
			assigned, done := 0, 0
			b.ResetTimer()
			f.simulate(b, nodesim.Config{Prefix: "tp", Nodes: slots / 4, SlotsPerNode: 4, Render: time.Second,
				OnAssign: func(_ string, _ int, at time.Time) {
					mu.Lock()
					defer mu.Unlock()
					if assigned++; assigned == 1 {
						first = at
					}
				},
				OnDone: func(_ string, at time.Time) {
					mu.Lock()
					defer mu.Unlock()
					if done++; done == jobs {
						last = at
						close(all)
					}
				}})
			select {
			case <-all:
			case <-time.After(5 * time.Minute):
				b.Fatalf("%d of %d jobs rendered", done, jobs)
			}
			rate := float64(jobs) / last.Sub(first).Seconds()
			b.ReportMetric(rate, "assignments/s")
			// The most a farm of these slots can do is one assignment per slot per render.
			b.ReportMetric(rate/float64(slots)*100, "slot-use-%")
		})
	}
}

// BenchmarkClusterHeartbeats: 5,000 simulated nodes at one heartbeat a second; the
// coordinator's CPU (share of one core) and resident memory over 10 s.
func BenchmarkClusterHeartbeats(b *testing.B) {
	f := newClusterBenchFarm(b)
	before := processRSS(b, f.c.cmd.Process.Pid)
	sim := f.simulate(b, nodesim.Config{Prefix: "hb", Nodes: 5000, SlotsPerNode: 1, Render: time.Second})
	b.ResetTimer()
	cpu0, wall0 := processCPU(b, f.c.cmd.Process.Pid), time.Now()
	deadline := time.After(10 * time.Second)
	<-deadline
	cpu := (processCPU(b, f.c.cmd.Process.Pid) - cpu0).Seconds() / time.Since(wall0).Seconds()
	b.ReportMetric(cpu*100, "coordinator-cpu-%")
	b.ReportMetric(float64(processRSS(b, f.c.cmd.Process.Pid))/(1<<20), "coordinator-rss-MiB")
	b.ReportMetric(float64(before)/(1<<20), "rss-before-MiB")
	if n := sim.Rehellos.Load(); n > 0 {
		b.Errorf("%d heartbeats were not recognised: nodes lost their lease under load", n)
	}
}

// BenchmarkClusterKilledNodeDetection: a real node process is SIGKILLed mid-render; the time
// until the coordinator declares it lost, and until its job starts again on another node.
func BenchmarkClusterKilledNodeDetection(b *testing.B) {
	c := startCoordinator(b, options{cluster: true, heartbeat: "1s", lease: "5s", logLevel: "warn"})
	cl := c.team("bench")
	tpl := cl.uploadTemplate(inspection())
	nodes := map[string]*renderNode{}
	for _, id := range []string{"k1", "k2"} {
		nodes[id] = c.startNode(id, 1)
	}
	cl.createJobs(tpl, 1)
	call := c.control.next(b)
	b.ResetTimer()
	killed := time.Now()
	nodes[call.Node].kill()
	c.waitNode(call.Node, actors.NodeLost)
	lost := time.Now()
	rerun := c.control.next(b)
	if rerun.Attempt != 2 {
		b.Fatalf("attempt %d", rerun.Attempt)
	}
	b.ReportMetric(lost.Sub(killed).Seconds(), "detect-s")
	b.ReportMetric(time.Since(killed).Seconds(), "rerun-s")
	c.control.answerAll(finishAll)
	rerun.answer(renderReply{Result: "finish"})
}

// processCPU is the user and system time a process has used (Linux /proc).
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
}

// processRSS is a process's resident memory in bytes (Linux /proc).
func processRSS(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
