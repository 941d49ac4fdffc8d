package main

import (
	"net/http"
	"os/exec"
	"runtime"
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
