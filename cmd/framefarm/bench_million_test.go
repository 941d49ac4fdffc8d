package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// envMillion sets how many jobs BenchmarkMillionJobs stores (1,000,000 by default).
const envMillion = "FRAMEFARM_BENCH_JOBS"

// BenchmarkMillionJobs stores a million jobs through the API (batches of 1000, 4 at once; one
// in ten at a higher priority and one at a lower, each with a tag of its own), cancels nine batches in ten so a tenth stays
// queued, and reports the coordinator's anonymous resident
// memory (heap and stacks, not the store file's pages) after intake, after listing load and
// after a restart; the restart's time to listening; GET /jobs/{id} throughput; and the p99 of each
// listing at that size.
func BenchmarkMillionJobs(b *testing.B) {
	total := 1_000_000
	if v := os.Getenv(envMillion); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10_000 {
			b.Fatalf("%s=%q: want a number of jobs, at least 10000", envMillion, v)
		}
		total = n
	}
	batches := total / 1000
	f := newBenchFarm(b)
	load := newLoadClient(f.c, f.client.token, 8)
	// One batch in ten at priority 5 tagged hot, one at -3 tagged cold (cancelled, as eight in
	// ten are), the rest at the default: pickup order has three segments.
	bodies := map[int][]byte{3: f.batchBodyOf(1000, f.bodyWithPriority(5, "hot")), 6: f.batchBodyOf(1000, f.bodyWithPriority(-3, "cold"))}
	body := f.batchBody(1000)
	ids := make([]string, batches) // batch ids
	var firstJobs []string
	var mu sync.Mutex
	// Sub-benchmarks carry the figures: a benchmark with sub-benchmarks reports none of its own.
	// Memory is read at once and settled: after one interval of the coordinator's memory
	// releaser, which returns what a burst left free.
	settle := func() { time.Sleep(11 * time.Second) }
	stage := func(name string, run func(b *testing.B)) { b.Run(name, run) }
	stage("intake", func(b *testing.B) {
		_, elapsed := drive(b, 4, batches, func(i int) (time.Duration, error) {
			batch := body
			if prioritised, ok := bodies[i%10]; ok {
				batch = prioritised
			}
			out, d, err := load.do(http.MethodPost, "/api/v2/batches", batch, http.StatusCreated)
			var bc struct {
				BatchID string    `json:"batchId"`
				Jobs    []created `json:"jobs"`
			}
			json.Unmarshal(out, &bc)
			mu.Lock()
			ids[i] = bc.BatchID
			if len(bc.Jobs) > 0 {
				firstJobs = append(firstJobs, bc.Jobs[0].ID)
			}
			mu.Unlock()
			return d, err
		})
		b.ReportMetric(float64(total)/elapsed.Seconds(), "intake-jobs/s")
		_, elapsed = drive(b, 4, batches, func(i int) (time.Duration, error) {
			if i%10 == 0 {
				return 0, nil
			}
			_, d, err := load.do(http.MethodPost, "/api/v2/batches/"+ids[i]+"/cancel", nil, http.StatusOK)
			return d, err
		})
		b.ReportMetric(float64(total-total/10)/elapsed.Seconds(), "cancels/s")
		f.c.waitMetric(b, fmt.Sprintf(`framefarm_queue_depth{engine="lottie"} %d`, total/10))
		b.ReportMetric(rssAnonMiB(b, f.c), "rss-anon-MiB-at-once")
		settle()
		b.ReportMetric(rssAnonMiB(b, f.c), "rss-anon-MiB-settled")
		b.ReportMetric(rssMiB(b, f.c), "rss-MiB-settled")
	})

	stage("get", func(b *testing.B) {
		getLoad := newLoadClient(f.c, f.client.token, 16)
		_, elapsed := drive(b, 16, 20000, func(i int) (time.Duration, error) {
			_, d, err := getLoad.do(http.MethodGet, "/api/v2/jobs/"+firstJobs[i%len(firstJobs)], nil, http.StatusOK)
			return d, err
		})
		b.ReportMetric(20000/elapsed.Seconds(), "gets/s")
	})

	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	to := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, query := range []string{"limit=100", "limit=100&sort=newest_first", "limit=100&sort=priority",
		"limit=100&states=queued&minimal=true", "limit=100&from=" + strconv.Itoa(total/2),
		"limit=100&from_date=" + from + "&to_date=" + to + "&exclude_states=manually_cancelled",
		"limit=100&tags=bench", "limit=100&tags=bench&sort=priority", "limit=100&sort=random",
		"limit=100&tags=bench&sort=random", "limit=100&sort=priority&from=" + strconv.Itoa(total/2),
		"limit=100&tags=bench&sort=priority&from=" + strconv.Itoa(total*95/100),
		"limit=100&sort=priority&from_date=" + from + "&to_date=" + to + "&from=" + strconv.Itoa(total/20),
		"limit=100&tags=hot,cold&from=" + strconv.Itoa(total/10), "limit=100&tags=hot,bench&from=" + strconv.Itoa(total/2),
		"limit=100&tags=hot,cold&sort=random"} {
		name := strings.NewReplacer("limit=100&", "", "&", " ").Replace(query)
		stage("list "+name, func(b *testing.B) {
			const listings = `code="200",method="GET",route="/api/v2/jobs"`
			before := serverHistogram(b, f.c, listings)
			lat, _ := drive(b, 4, 400, func(int) (time.Duration, error) {
				_, d, err := load.do(http.MethodGet, "/api/v2/jobs?"+query, nil, http.StatusOK)
				return d, err
			})
			lat.report(b)
			// The same requests timed by the server (the bound of the bucket holding the p99).
			b.ReportMetric(serverHistogram(b, f.c, listings).since(before).quantile(0.99)*1000, "server-p99-ms")
		})
	}
	stage("list server-side", func(b *testing.B) {
		// The coordinator's own histogram over every listing above: the time in the server,
		// without the load generator's share of the machine (the upper bound of the bucket).
		b.ReportMetric(serverQuantile(b, f.c, `code="200",method="GET",route="/api/v2/jobs"`, 0.99)*1000, "server-p99-ms")
		b.ReportMetric(serverQuantile(b, f.c, `code="200",method="GET",route="/api/v2/jobs"`, 0.50)*1000, "server-p50-ms")
	})
	stage("memory after reads", func(b *testing.B) {
		b.ReportMetric(rssAnonMiB(b, f.c), "rss-anon-MiB-at-once")
		settle()
		b.ReportMetric(rssAnonMiB(b, f.c), "rss-anon-MiB-settled")
		b.ReportMetric(rssMiB(b, f.c), "rss-MiB-settled")
	})

	stage("restart", func(b *testing.B) {
		f.c.stop()
		started := time.Now()
		f.c.restart()
		b.ReportMetric(time.Since(started).Seconds(), "restart-s")
		f.c.waitMetric(b, fmt.Sprintf(`framefarm_queue_depth{engine="lottie"} %d`, total/10))
		b.ReportMetric(rssAnonMiB(b, f.c), "rss-anon-MiB")
		b.ReportMetric(rssMiB(b, f.c), "rss-MiB")
	})

	stage("backup", func(b *testing.B) {
		// 5,000 jobs a second arrive (batches of 100, open loop) for a while alone, then while a
		// backup is taken; then the backup is restored into an empty folder.
		batch := f.batchBody(100)
		intakeFor := func(during func()) *latencies {
			lat, stop := &latencies{}, make(chan struct{})
			done := paced(newLoadClient(f.c, f.client.token, 16), 16, 50, stop, func(l *loadClient, _ int) {
				if _, d, err := l.do(http.MethodPost, "/api/v2/batches", batch, http.StatusCreated); err == nil {
					lat.add(d)
				}
			})
			during()
			close(stop)
			done.Wait()
			return lat
		}
		idle := intakeFor(func() { time.Sleep(10 * time.Second) })
		file := filepath.Join(b.TempDir(), "farm.tar")
		var took time.Duration
		during := intakeFor(func() {
			started := time.Now()
			if out, err := framefarm("backup", "--url", f.c.url, "--admin-token", adminToken, "--out", file); err != nil {
				b.Fatalf("backup: %v\n%s", err, out)
			}
			took = time.Since(started)
		})
		started := time.Now()
		if out, err := framefarm("restore", "--data-dir", filepath.Join(b.TempDir(), "restored"), file); err != nil {
			b.Fatalf("restore: %v\n%s", err, out)
		}
		b.ReportMetric(time.Since(started).Seconds(), "restore-s")
		b.ReportMetric(took.Seconds(), "backup-s")
		if info, err := os.Stat(file); err == nil {
			b.ReportMetric(float64(info.Size())/(1<<20), "backup-MiB")
		}
		b.ReportMetric(idle.quantile(0.99), "intake-p99-idle-ms")
		b.ReportMetric(during.quantile(0.99), "intake-p99-during-ms")
	})
}

// rssAnonMiB reads the process's anonymous resident memory (RssAnon in /proc/PID/status).
func rssAnonMiB(b *testing.B, c *coordinator) float64 { return procStatusMiB(b, c, "RssAnon:") }

// rssMiB reads the process's whole resident memory, the store file's cached pages included.
func rssMiB(b *testing.B, c *coordinator) float64 { return procStatusMiB(b, c, "VmRSS:") }

func procStatusMiB(b *testing.B, c *coordinator, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, c.cmd.Process.Pid)
	return 0
}
