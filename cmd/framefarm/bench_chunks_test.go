package main

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/nodesim"
)

// BenchmarkSplitJobOnSimulatedNodes: a 1,200-frame job split into 60-frame chunks over 20
// simulated single-slot nodes rendering a frame a second; from POST /jobs to the job finished,
// against the 60 s a perfect spread of its frames takes (the ratio the issue bounds by 1.15).
func BenchmarkSplitJobOnSimulatedNodes(b *testing.B) {
	const frames, perChunk, nodes = 1200, 60, 20
	perFrame := time.Second
	// Job signals on: the benchmark waits on its one job's end.
	c := startCoordinator(b, options{cluster: true, heartbeat: "1s", lease: "5s", logLevel: "warn"})
	f := &benchFarm{c: c, client: c.team("bench")}
	long := inspection()
	long.Compositions[0].Duration = frames / long.Compositions[0].FPS
	tpl := f.client.uploadTemplate(long)
	var renders atomic.Int64
	f.simulate(b, nodesim.Config{Prefix: "split", Nodes: nodes, SlotsPerNode: 1, PerFrame: perFrame,
		OnDone: func(string, time.Time) { renders.Add(1) }})
	body := renderJob(tpl)
	body["chunks"] = map[string]any{"frames": perChunk}
	b.ResetTimer()
	took := renderTimed(b, f.c, f.client, body)
	ideal := time.Duration(frames/nodes) * perFrame
	b.ReportMetric(took.Seconds(), "s-to-finished")
	b.ReportMetric(took.Seconds()/ideal.Seconds(), "x-perfect-spread")
	b.ReportMetric(float64(renders.Load()), "renders")
}

// BenchmarkSplitRenderOnTwoRealNodes: the 300-frame 1080p Lottie fixture as H.264 on two real
// render nodes, each pinned to one core: rendered whole (on one of them), then split in two and
// joined; POST /jobs to finished, and the split's time as a share of the whole's.
func BenchmarkSplitRenderOnTwoRealNodes(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two CPUs, one per node")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		b.Skip("taskset (util-linux) is not installed")
	}
	c := startCoordinator(b, options{cluster: true, realEngines: true, logLevel: "warn"})
	c.startNodeOnCPUs("core0", 1, "0")
	c.startNodeOnCPUs("core1", 1, "1")
	cl := c.team("bench")
	tpl := cl.uploadTemplateFile("zip", fixtureZip(b, "lottie/synthetic"))
	render := func(chunks any) time.Duration {
		body := kenburnsJob(tpl.ID)
		body["settings"] = map[string]any{"type": "video", "codec": "h264_vbr_5mbps"}
		if chunks != nil {
			body["chunks"] = chunks
		}
		return renderTimed(b, c, cl, body)
	}
	b.ResetTimer()
	whole := render(nil)
	split := render(map[string]any{"count": 2})
	b.ReportMetric(whole.Seconds(), "whole-s")
	b.ReportMetric(split.Seconds(), "split-s")
	b.ReportMetric(split.Seconds()/whole.Seconds(), "split/whole")
}

// renderTimed creates a job and returns the time from its POST to its end, which must be finished.
func renderTimed(b *testing.B, c *coordinator, cl *client, body map[string]any) time.Duration {
	b.Helper()
	started := time.Now()
	var made created
	cl.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &made)
	var end string
	if !c.Until(func() bool {
		states := c.signals("job")[made.ID]
		for _, s := range []string{"finished", "error", "manually_cancelled"} {
			if states[s] {
				end = s
			}
		}
		return end != ""
	}, 5*time.Minute) {
		b.Fatalf("job %s did not end within 5 minutes", made.ID)
	}
	took := time.Since(started)
	if end != "finished" {
		b.Fatalf("job %s ended %s:\n%s", made.ID, end, cl.logs(made.ID))
	}
	return took
}

// hugeSplitJob is a job of a 100,000-frame composition split as chunks says.
func (f *benchFarm) hugeSplitJob(chunks map[string]any) map[string]any {
	long := inspection()
	long.Compositions[0].Duration = 100000 / long.Compositions[0].FPS
	huge := renderJob(f.client.uploadTemplate(long))
	huge["chunks"] = chunks
	return huge
}

// BenchmarkHugeSplitJob: intake (POST /jobs, 16 clients) and listings (GET /jobs, 4 clients)
// before and after a 100,000-frame job split into 60-frame chunks (1,667 chunks) joins the
// queue of a farm with no render node; how long its own POST takes, and the coordinator's
// resident memory before and after.
func BenchmarkHugeSplitJob(b *testing.B) {
	f := newBenchFarm(b)
	huge := f.hugeSplitJob(map[string]any{"frames": 60})
	load := newLoadClient(f.c, f.client.token, 20)
	measure := func(phase string) {
		lat, elapsed := drive(b, 16, 4000, func(int) (time.Duration, error) {
			_, d, err := load.do(http.MethodPost, "/api/v2/jobs", f.body, http.StatusCreated)
			return d, err
		})
		b.ReportMetric(4000/elapsed.Seconds(), phase+"-jobs/s")
		b.ReportMetric(float64(lat.all[len(lat.all)/2].Microseconds())/1000, phase+"-post-p50-ms")
		list, _ := drive(b, 4, 400, func(int) (time.Duration, error) {
			_, d, err := load.do(http.MethodGet, "/api/v2/jobs?limit=50", nil, http.StatusOK)
			return d, err
		})
		slices.Sort(list.all)
		b.ReportMetric(float64(list.all[len(list.all)/2].Microseconds())/1000, phase+"-list-p50-ms")
		b.ReportMetric(float64(processRSS(b, f.c.cmd.Process.Pid))/(1<<20), phase+"-rss-MiB")
	}
	b.ResetTimer()
	measure("before")
	started := time.Now()
	var made created
	f.client.must(http.MethodPost, "/api/v2/jobs", huge, http.StatusCreated, &made)
	b.ReportMetric(float64(time.Since(started).Milliseconds()), "huge-post-ms")
	measure("after")
	if j := f.client.job(made.ID); len(j.Chunks) != 1666 {
		b.Fatalf("the huge job has %d chunks", len(j.Chunks))
	}
}

// BenchmarkCancelOfManyChunks: team bench queues 20 jobs of 5,000 chunks each (100,000 chunks,
// no render node) and cancels them in one request, while team other keeps creating jobs at a
// steady 40 a second; other's POST /jobs latency idle and during the cancel's sweep of the
// chunks, how long the cancel took to answer, and how long the sweep took.
func BenchmarkCancelOfManyChunks(b *testing.B) {
	f := newBenchFarm(b)
	huge := f.hugeSplitJob(map[string]any{"count": 5000})
	var ids []string
	for range 20 {
		var made created
		f.client.must(http.MethodPost, "/api/v2/jobs", huge, http.StatusCreated, &made)
		ids = append(ids, made.ID)
	}
	admin := &client{c: f.c, token: adminToken}
	queuedChunks := func() int {
		var teams []struct {
			Name    string `json:"name"`
			Waiting struct {
				Chunks int `json:"chunks"`
			} `json:"queued"`
		}
		admin.must(http.MethodGet, "/api/v2/admin/teams", nil, http.StatusOK, &teams)
		for _, t := range teams {
			if t.Name == "bench" {
				return t.Waiting.Chunks
			}
		}
		b.Fatal("no team bench")
		return 0
	}
	if n := queuedChunks(); n != 100000 {
		b.Fatalf("%d chunks queued, want 100000", n)
	}
	other := f.c.team("other")
	body, _ := json.Marshal(renderJob(other.uploadTemplate(inspection())))
	load := newLoadClient(f.c, other.token, 8)
	// posts sends other's jobs at 40 a second while phase runs, and returns their latencies.
	posts := func(phase func()) *latencies {
		lat, stop := &latencies{}, make(chan struct{})
		done := paced(load, 8, 40, stop, func(l *loadClient, _ int) {
			_, d, err := l.do(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated)
			if err != nil {
				b.Error(err)
			}
			lat.add(d)
		})
		phase()
		close(stop)
		done.Wait()
		slices.Sort(lat.all)
		return lat
	}
	p99 := func(l *latencies) float64 { return float64(l.all[len(l.all)*99/100].Microseconds()) / 1000 }
	b.ResetTimer()
	idle := posts(func() { time.Sleep(15 * time.Second) })
	var started time.Time
	var answered time.Duration
	during := posts(func() {
		started = time.Now()
		f.client.must(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": ids}, http.StatusOK, nil)
		answered = time.Since(started)
		for queuedChunks() > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	})
	swept := time.Since(started)
	b.ReportMetric(p99(idle), "idle-post-p99-ms")
	b.ReportMetric(p99(during), "cancelling-post-p99-ms")
	b.ReportMetric(p99(during)/p99(idle), "x-idle-p99")
	b.ReportMetric(float64(answered.Milliseconds()), "cancel-answer-ms")
	b.ReportMetric(swept.Seconds(), "s-to-all-cancelled")
}
