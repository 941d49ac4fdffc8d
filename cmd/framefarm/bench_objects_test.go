package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// objectFarm is a coordinator and its render node processes with the farm's files in one
// backend: "local" or "s3" (the tests' SeaweedFS on this machine).
type objectFarm struct {
	backend string
	c       *coordinator
	cl      *client
}

func startObjectFarm(b *testing.B, backend string, nodes int, realEngines bool) *objectFarm {
	config := "\n[objects]\nbackend = \"local\"\n"
	if backend == "s3" {
		config = s3Config(testBucket(b), "s3", fmt.Sprintf("%s-%d", b.Name(), time.Now().UnixNano()))
	}
	// The cluster's production timings: a heartbeat a second is part of what a node costs.
	c := startCoordinator(b, options{cluster: true, heartbeat: "1s", lease: "5s", realEngines: realEngines, logLevel: "info",
		config: config, metricsListen: true})
	for i := range nodes {
		c.startNode(fmt.Sprintf("%s-n%d", backend, i+1), 1)
	}
	return &objectFarm{backend: backend, c: c, cl: c.team("bench")}
}

// through is every byte the coordinator received and sent on each link: its HTTP port, the
// messages with its nodes and its own requests to the object store (its metrics listener aside).
func (f *objectFarm) through() map[string]float64 {
	links := map[string]float64{}
	for _, link := range []string{"api", "nodes", "objects"} {
		links[link] = f.c.traffic(link)
	}
	return links
}

// BenchmarkObjectStoresRenderEndToEnd: a 1080p Lottie render (the synthetic kenburns fixture,
// all 300 frames, H.264) from POST /jobs to its output downloaded by the client, on two farms of
// a coordinator and one render node process each: the files in the local folder, and in a
// bucket of a SeaweedFS on this machine. Renders alternate between the farms, one at a time; the
// first of each warms the node's worker and template cache and is not counted. Reported: each
// backend's median, their ratio, and the coordinator's own network bytes per render against the
// output's size.
func BenchmarkObjectStoresRenderEndToEnd(b *testing.B) {
	farms := []*objectFarm{startObjectFarm(b, "local", 1, true), startObjectFarm(b, "s3", 1, true)}
	templates := map[string]string{}
	for _, f := range farms {
		var tpl templateAnswer
		f.cl.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "kenburns"}, http.StatusCreated, &tpl)
		f.cl.put(tpl.UploadInfo.URL, fixtureZip(b, "lottie/synthetic"), http.StatusOK)
		f.c.waitFor("template", tpl.ID, "uploaded")
		templates[f.backend] = tpl.ID
	}
	const rounds = 6
	took := map[string][]time.Duration{}
	through := map[string]map[string]float64{"local": {}, "s3": {}} // by backend and link
	outputBytes := map[string]float64{}
	for round := range rounds {
		for _, f := range farms {
			before := f.through()
			started := time.Now()
			var cr created
			f.cl.must(http.MethodPost, "/api/v2/jobs", map[string]any{
				"template": map[string]any{"id": templates[f.backend], "composition": "kenburns"},
				"assets":   []map[string]any{{"type": "text", "layerName": "Title", "value": "Objects"}},
				"settings": map[string]any{"type": "video"}}, http.StatusCreated, &cr)
			if state := f.c.waitFor("job", cr.ID, "finished", "error"); state != "finished" {
				b.Fatalf("%s render: %s\n%s", f.backend, state, f.cl.logs(cr.ID))
			}
			status, video := get(b, f.cl.job(cr.ID).OutputURL)
			elapsed := time.Since(started)
			if status != http.StatusOK || len(video) < 100<<10 {
				b.Fatalf("%s output: %d, %d bytes", f.backend, status, len(video))
			}
			if round == 0 {
				continue
			}
			took[f.backend] = append(took[f.backend], elapsed)
			for link, bytes := range f.through() {
				through[f.backend][link] += bytes - before[link]
			}
			outputBytes[f.backend] += float64(len(video))
		}
	}
	median := func(backend string) float64 {
		slices.Sort(took[backend])
		return took[backend][len(took[backend])/2].Seconds()
	}
	b.ReportMetric(median("local"), "local-s")
	b.ReportMetric(median("s3"), "s3-s")
	b.ReportMetric(median("s3")/median("local"), "s3/local")
	b.ReportMetric(outputBytes["s3"]/(rounds-1)/1024, "output-KiB")
	for _, backend := range []string{"local", "s3"} {
		all := 0.0
		for link, bytes := range through[backend] {
			all += bytes
			b.ReportMetric(bytes/(rounds-1)/1024, backend+"-"+link+"-KiB/render")
		}
		b.ReportMetric(100*all/outputBytes[backend], backend+"-coordinator-%-of-output")
	}
}

// BenchmarkObjectStoreThousandJobs: 1,000 jobs in one batch rendered by two render node
// processes with the files in a bucket (the test renderer, outputs of 256 KiB). Every output is
// then downloaded through its outputUrl and checked to be its own job's, whole; the coordinator's
// data folder holds none of them. Reported: jobs per second from the batch to the last finished,
// and the coordinator's own network bytes per job against the output's size.
func BenchmarkObjectStoreThousandJobs(b *testing.B) {
	const jobs, size = 1000, 256 << 10
	f := startObjectFarm(b, "s3", 2, false)
	f.c.control.answerAll(func(*renderCall) renderReply { return renderReply{Result: "finish", Size: size} })
	tpl := f.cl.uploadTemplate(inspection())
	before := f.through()
	started := time.Now()
	body := make([]map[string]any, jobs)
	for i := range body {
		body[i] = renderJob(tpl)
	}
	var batch struct {
		Jobs []created `json:"jobs"`
	}
	f.cl.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": body}, http.StatusCreated, &batch)
	if len(batch.Jobs) != jobs {
		b.Fatalf("the batch made %d jobs", len(batch.Jobs))
	}
	for _, j := range batch.Jobs {
		f.c.waitJob(j.ID, "finished")
	}
	elapsed := time.Since(started)
	through := 0.0
	for link, bytes := range f.through() {
		through += bytes - before[link]
		b.ReportMetric((bytes-before[link])/jobs/1024, link+"-KiB/job")
	}
	for _, j := range batch.Jobs {
		status, out := get(b, j.OutputURL)
		var call renderCall
		if status != http.StatusOK || len(out) != size || json.Unmarshal(out, &call) != nil || call.JobID != j.ID {
			b.Fatalf("output of %s: %d, %d bytes, of job %q", j.ID, status, len(out), call.JobID)
		}
	}
	if _, err := os.Stat(filepath.Join(f.c.dataDir(), "objects", "outputs")); !os.IsNotExist(err) {
		b.Fatalf("the coordinator's data folder holds outputs: %v", err)
	}
	b.ReportMetric(jobs/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(100*through/jobs/size, "coordinator-%-of-output")
}
