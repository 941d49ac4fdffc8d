package main

// Load benchmarks: a real coordinator process (durable writes, embedded node off so jobs stay
// queued) and a load generator in this process, over loopback. Run with `make bench`
// (-benchtime 1x: each benchmark runs its scenario once and reports throughput and latency).
// Client and server share the machine's cores; the figures include the generator's own cost.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// loadClient sends requests with keep-alive connections, as a busy client would.
type loadClient struct {
	hc    *fasthttp.HostClient
	token string
}

func newLoadClient(c *coordinator, token string, conns int) *loadClient {
	return &loadClient{token: token, hc: &fasthttp.HostClient{Addr: c.addr, MaxConns: conns, ReadTimeout: time.Minute, WriteTimeout: time.Minute}}
}

func (l *loadClient) do(method, path string, body []byte, want int) ([]byte, time.Duration, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + l.hc.Addr + path)
	req.Header.SetMethod(method)
	req.Header.Set("Authorization", "Bearer "+l.token)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	started := time.Now()
	err := l.hc.Do(req, resp)
	elapsed := time.Since(started)
	if err == nil && resp.StatusCode() != want {
		err = fmt.Errorf("%s %s: status %d: %.200s", method, path, resp.StatusCode(), resp.Body())
	}
	return append([]byte(nil), resp.Body()...), elapsed, err
}

// latencies collects request durations.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	b.ReportMetric(l.quantile(0.50), "p50-ms")
	b.ReportMetric(l.quantile(0.99), "p99-ms")
}

// quantile is the latency below which a share p of those taken lie, in milliseconds.
func (l *latencies) quantile(p float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.all) == 0 {
		return 0
	}
	slices.Sort(l.all)
	return float64(l.all[int(p*float64(len(l.all)-1))].Microseconds()) / 1000
}

// drive sends total requests from concurrency workers; make builds request i.
func drive(b *testing.B, concurrency, total int, send func(i int) (time.Duration, error)) (*latencies, time.Duration) {
	var next atomic.Int64
	lat := &latencies{}
	var wg sync.WaitGroup
	started := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				d, err := send(i)
				if err != nil {
					b.Error(err)
					return
				}
				lat.add(d)
			}
		}()
	}
	wg.Wait()
	return lat, time.Since(started)
}

type benchFarm struct {
	c      *coordinator
	client *client
	tplID  string
	body   []byte
}

func newBenchFarm(b *testing.B) *benchFarm {
	return newBenchFarmWith(b, options{})
}

// newBenchFarmWith starts a bench farm with extra options (the harness's are set here).
func newBenchFarmWith(b *testing.B, opts options) *benchFarm {
	opts.slots, opts.logLevel, opts.noJobSignals = 0, "warn", true
	c := startCoordinator(b, opts)
	cl := c.team("bench")
	tplID := cl.uploadTemplate(inspection())
	body, _ := json.Marshal(map[string]any{
		"template": map[string]any{"id": tplID, "composition": "main"},
		"assets":   []any{map[string]any{"type": "text", "layerName": "Title", "value": "Hello"}},
		"tags":     []string{"bench"},
	})
	return &benchFarm{c: c, client: cl, tplID: tplID, body: body}
}

// bodyWithPriority is the bench job with a priority of its own and one more tag.
func (f *benchFarm) bodyWithPriority(priority int, tag string) []byte {
	var job map[string]any
	json.Unmarshal(f.body, &job)
	job["priority"], job["tags"] = priority, []string{"bench", tag}
	body, _ := json.Marshal(job)
	return body
}

func (f *benchFarm) batchBody(n int) []byte { return f.batchBodyOf(n, f.body) }

// batchBodyOf is a batch of n copies of one job.
func (f *benchFarm) batchBodyOf(n int, job []byte) []byte {
	jobs := make([]json.RawMessage, n)
	for i := range jobs {
		jobs[i] = job
	}
	body, _ := json.Marshal(map[string]any{"jobs": jobs})
	return body
}

func BenchmarkCreateJob(b *testing.B) {
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			f := newBenchFarm(b)
			load := newLoadClient(f.c, f.client.token, conc)
			total := 20000
			if conc == 1 {
				total = 3000
			}
			b.ResetTimer()
			lat, elapsed := drive(b, conc, total, func(int) (time.Duration, error) {
				_, d, err := load.do(http.MethodPost, "/api/v2/jobs", f.body, http.StatusCreated)
				return d, err
			})
			b.ReportMetric(float64(total)/elapsed.Seconds(), "jobs/s")
			lat.report(b)
		})
	}
}

// BenchmarkCreateJobWithViewers: 10,000 POST /jobs at 64 concurrent, with no dashboard viewer and
// with 50 viewers reading the event stream (the intake must not slow by more than 10%).
// viewers-dropped counts streams that ended early (a viewer too slow to keep up).
func BenchmarkCreateJobWithViewers(b *testing.B) {
	for _, viewers := range []int{0, 50} {
		b.Run(fmt.Sprintf("viewers=%d", viewers), func(b *testing.B) {
			f := newBenchFarm(b)
			var events, dropped atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range viewers {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.c.url+"/api/v2/events", nil)
				req.Header.Set("Authorization", "Bearer "+f.client.token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("viewer: %v", err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						if strings.HasPrefix(sc.Text(), "event: ") {
							events.Add(1)
						}
					}
					if ctx.Err() == nil {
						dropped.Add(1)
					}
				}()
			}
			load := newLoadClient(f.c, f.client.token, 64)
			total := 10000
			b.ResetTimer()
			lat, elapsed := drive(b, 64, total, func(int) (time.Duration, error) {
				_, d, err := load.do(http.MethodPost, "/api/v2/jobs", f.body, http.StatusCreated)
				return d, err
			})
			b.StopTimer()
			cancel()
			wg.Wait()
			b.ReportMetric(float64(total)/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(events.Load()), "events")
			b.ReportMetric(float64(dropped.Load()), "viewers-dropped")
			lat.report(b)
		})
	}
}

// BenchmarkCreateJobOneCore: POST /jobs at 64 concurrent with the server pinned to one CPU
// (taskset -c 1: Go then runs it with GOMAXPROCS=1, as in a one-CPU container); the load
// generator, in this process, is not pinned.
func BenchmarkCreateJobOneCore(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs a second CPU for the load generator")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		b.Skip("taskset (util-linux) is not installed")
	}
	f := newBenchFarmWith(b, options{cpus: "1"})
	load := newLoadClient(f.c, f.client.token, 64)
	total := 20000
	b.ResetTimer()
	lat, elapsed := drive(b, 64, total, func(int) (time.Duration, error) {
		_, d, err := load.do(http.MethodPost, "/api/v2/jobs", f.body, http.StatusCreated)
		return d, err
	})
	b.ReportMetric(float64(total)/elapsed.Seconds(), "jobs/s")
	lat.report(b)
}

func BenchmarkCreateBatch1000(b *testing.B) {
	f := newBenchFarm(b)
	load := newLoadClient(f.c, f.client.token, 4)
	body := f.batchBody(1000)
	batches := 60
	b.ResetTimer()
	lat, elapsed := drive(b, 4, batches, func(int) (time.Duration, error) {
		_, d, err := load.do(http.MethodPost, "/api/v2/batches", body, http.StatusCreated)
		return d, err
	})
	b.ReportMetric(float64(batches*1000)/elapsed.Seconds(), "jobs/s")
	lat.report(b)
}

// BenchmarkGetJobUnderLoad measures GET /jobs/{id} at a steady 1,000 requests/s while jobs are
// created at half of the peak creation rate measured first: half of peak load in all.
func BenchmarkGetJobUnderLoad(b *testing.B) {
	f := newBenchFarm(b)
	load := newLoadClient(f.c, f.client.token, 64)
	var ids []string
	var mu sync.Mutex
	_, elapsed := drive(b, 64, 10000, func(int) (time.Duration, error) {
		out, d, err := load.do(http.MethodPost, "/api/v2/jobs", f.body, http.StatusCreated)
		var cr created
		json.Unmarshal(out, &cr)
		mu.Lock()
		ids = append(ids, cr.ID)
		mu.Unlock()
		return d, err
	})
	peak := 10000 / elapsed.Seconds()
	b.ReportMetric(peak, "peak-creates/s")

	stop := make(chan struct{})
	var created atomic.Int64
	creators := paced(newLoadClient(f.c, f.client.token, 32), 32, peak/2, stop, func(l *loadClient, _ int) {
		if _, _, err := l.do(http.MethodPost, "/api/v2/jobs", f.body, http.StatusCreated); err == nil {
			created.Add(1)
		}
	})
	lat := &latencies{}
	b.ResetTimer()
	started := time.Now()
	getStop := make(chan struct{})
	var gets atomic.Int64
	getters := paced(newLoadClient(f.c, f.client.token, 16), 16, 1000, getStop, func(l *loadClient, i int) {
		_, d, err := l.do(http.MethodGet, "/api/v2/jobs/"+ids[i%len(ids)], nil, http.StatusOK)
		if err != nil {
			b.Error(err)
			return
		}
		lat.add(d)
		if gets.Add(1) == 10000 {
			close(getStop)
		}
	})
	getters.Wait()
	close(stop)
	creators.Wait()
	seconds := time.Since(started).Seconds()
	b.ReportMetric(float64(created.Load())/seconds, "background-creates/s")
	b.ReportMetric(float64(gets.Load())/seconds, "gets/s")
	lat.report(b)
	b.ReportMetric(serverQuantile(b, f.c, `code="200",method="GET",route="/api/v2/jobs/{id}"`, 0.99)*1000, "server-p99-ms")
}

// waitMetric reads /metrics until it holds line (bounded by waitLimit).
func (c *coordinator) waitMetric(b testing.TB, line string) {
	deadline := time.Now().Add(waitLimit)
	for {
		_, metrics := get(b, c.url+"/metrics")
		if strings.Contains(string(metrics), line+"\n") {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("metrics never showed %s", line)
		}
	}
}

// serverQuantile reads the coordinator's own request histogram for labels and returns the
// upper bound of the bucket holding quantile q: the time in the server, without the load
// generator's share of the machine.
func serverQuantile(b *testing.B, c *coordinator, labels string, q float64) float64 {
	h := serverHistogram(b, c, labels)
	if len(h.counts) == 0 {
		b.Fatalf("no histogram for %s", labels)
	}
	return h.quantile(q)
}

// histogram is a Prometheus histogram's cumulative counts by bucket bound.
type histogram struct{ bounds, counts []float64 }

// serverHistogram reads a route's histogram; it has no buckets before the route's first answer.
func serverHistogram(b *testing.B, c *coordinator, labels string) histogram {
	return histogramOf(b, c, "framefarm_http_request_duration_seconds", labels+",")
}

// histogramOf reads histogram name of the coordinator's metrics, of the series whose labels
// start with labels (each followed by a comma; "" for a histogram without labels).
func histogramOf(b *testing.B, c *coordinator, name, labels string) histogram {
	_, metrics := get(b, c.metricsURL+"/metrics")
	var h histogram
	prefix := name + "_bucket{" + labels + `le="`
	for _, line := range strings.Split(string(metrics), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		var le, n float64
		if _, err := fmt.Sscanf(strings.Replace(rest, `"} `, " ", 1), "%g %g", &le, &n); err == nil {
			h.bounds, h.counts = append(h.bounds, le), append(h.counts, n)
		}
	}
	return h
}

// since is what was counted after earlier was read.
func (h histogram) since(earlier histogram) histogram {
	out := histogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
	for i := range out.counts {
		if i < len(earlier.counts) {
			out.counts[i] -= earlier.counts[i]
		}
	}
	return out
}

func (h histogram) quantile(q float64) float64 {
	total := h.counts[len(h.counts)-1]
	for i, n := range h.counts {
		if n >= q*total {
			return h.bounds[i]
		}
	}
	return h.bounds[len(h.bounds)-1]
}

// paced runs send at rate per second (open loop: a slow answer does not slow the arrivals) on
// workers, until stop closes; the returned group ends when they have.
func paced(l *loadClient, workers int, rate float64, stop chan struct{}, send func(*loadClient, int)) *sync.WaitGroup {
	due := make(chan int, 100000)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range due {
				send(l, i)
			}
		}()
	}
	go func() {
		defer close(due)
		ticker := time.NewTicker(time.Millisecond)
		defer ticker.Stop()
		started, sent := time.Now(), 0
		for {
			select {
			case <-stop:
				return
			case now := <-ticker.C:
				for target := int(now.Sub(started).Seconds() * rate); sent < target; sent++ {
					select {
					case due <- sent:
					case <-stop:
						return
					}
				}
			}
		}
	}()
	return &wg
}

// BenchmarkListJobs lists among 100,000 stored jobs.
func BenchmarkListJobs(b *testing.B) {
	f := newBenchFarm(b)
	load := newLoadClient(f.c, f.client.token, 8)
	body := f.batchBody(1000)
	drive(b, 4, 100, func(int) (time.Duration, error) {
		_, d, err := load.do(http.MethodPost, "/api/v2/batches", body, http.StatusCreated)
		return d, err
	})
	// Cancel 10 batches' worth so state filters have something to tell apart.
	var listed []job
	f.client.must(http.MethodGet, "/api/v2/jobs?limit=1000", nil, http.StatusOK, &listed)
	ids := make([]string, len(listed))
	for i, j := range listed {
		ids[i] = j.ID
	}
	f.client.must(http.MethodPost, "/api/v2/jobs/cancel", map[string]any{"jobs": ids}, http.StatusOK, nil)
	// Measure once the coordinator has settled: every job actor started and queued.
	f.c.waitMetric(b, `framefarm_queue_depth{engine="lottie"} 99000`)
	for _, query := range []string{"limit=100", "limit=100&sort=newest_first", "limit=100&states=manually_cancelled",
		"limit=100&sort=priority", "limit=100&tags=bench", "limit=100&from=50000", "limit=1000&minimal=true"} {
		b.Run(query, func(b *testing.B) {
			lat, elapsed := drive(b, 4, 200, func(int) (time.Duration, error) {
				_, d, err := load.do(http.MethodGet, "/api/v2/jobs?"+query, nil, http.StatusOK)
				return d, err
			})
			b.ReportMetric(200/elapsed.Seconds(), "lists/s")
			lat.report(b)
		})
	}
}

// BenchmarkCancelBatch1000 cancels batches of 1000 queued jobs, one at a time.
func BenchmarkCancelBatch1000(b *testing.B) {
	f := newBenchFarm(b)
	load := newLoadClient(f.c, f.client.token, 4)
	body := f.batchBody(1000)
	var batchIDs []string
	for range 20 {
		out, _, err := load.do(http.MethodPost, "/api/v2/batches", body, http.StatusCreated)
		if err != nil {
			b.Fatal(err)
		}
		var bc struct {
			BatchID string `json:"batchId"`
		}
		json.Unmarshal(out, &bc)
		batchIDs = append(batchIDs, bc.BatchID)
	}
	b.ResetTimer()
	lat, elapsed := drive(b, 1, len(batchIDs), func(i int) (time.Duration, error) {
		_, d, err := load.do(http.MethodPost, "/api/v2/batches/"+batchIDs[i]+"/cancel", nil, http.StatusOK)
		return d, err
	})
	b.ReportMetric(float64(len(batchIDs)*1000)/elapsed.Seconds(), "cancels/s")
	lat.report(b)
}

// BenchmarkQueuedToFirstFrame measures the coordinator's overhead per job with the real Lottie
// engine on the embedded node: from the POST /jobs answer (the job durable and queued) to the
// first progress the engine reports, which it does after drawing its first frame. It covers
// scheduling, dispatch, the template fetch (cached after the first job), extraction, injection,
// the worker loading the animation and the first frame. Jobs run one at a time, warm.
func BenchmarkQueuedToFirstFrame(b *testing.B) {
	c := startCoordinator(b, options{slots: 1, realEngines: true, logLevel: "info"})
	acme := c.team("acme")
	var tpl templateAnswer
	acme.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "kenburns"}, http.StatusCreated, &tpl)
	acme.put(tpl.UploadInfo.URL, fixtureZip(b, "lottie/synthetic"), http.StatusOK)
	c.waitFor("template", tpl.ID, "uploaded")
	body := map[string]any{"template": map[string]any{"id": tpl.ID, "composition": "kenburns"},
		"assets":   []map[string]any{{"type": "text", "layerName": "Title", "value": "Overhead"}},
		"settings": map[string]any{"type": "video", "frames": []int{0, 14}}}
	toFrame, toStart := &latencies{}, &latencies{}
	const jobs = 11 // the first one warms the worker and the template cache and is not counted
	for i := range jobs {
		var cr created
		acme.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &cr)
		queued := time.Now()
		first := c.waitFirst("progress", cr.ID)
		c.waitJob(cr.ID, "finished")
		if i == 0 {
			continue
		}
		toFrame.add(first.Sub(queued))
		j := acme.job(cr.ID)
		createdAt, err1 := time.Parse(time.RFC3339Nano, j.Stats.CreatedAt)
		startedAt, err2 := time.Parse(time.RFC3339Nano, *j.Stats.StartedAt)
		if err1 != nil || err2 != nil {
			b.Fatal(err1, err2)
		}
		toStart.add(startedAt.Sub(createdAt))
	}
	toFrame.report(b)
	// startedAt - createdAt: the coordinator's part (queue, schedule, dispatch to the node).
	slices.Sort(toStart.all)
	b.ReportMetric(float64(toStart.all[len(toStart.all)/2].Microseconds())/1000, "dispatch-p50-ms")
}
