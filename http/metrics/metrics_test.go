package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
)

// The metrics follow what the actors publish: transitions (a split job's chunks left out, as the
// store's counts leave them), fenced reports, requeues, render times, retention's removals.
func TestMetricsFollowTheActorsEvents(t *testing.T) {
	m := New()
	ev := &actors.Events{}
	m.Watch(ev)
	for _, e := range []actors.JobStateChanged{
		{To: persistence.JobQueued}, {To: persistence.JobQueued},
		{From: persistence.JobQueued, To: persistence.JobRendering},
		{From: persistence.JobRendering, To: persistence.JobFinished},
		{From: persistence.JobQueued, To: persistence.JobRendering, Chunk: true},
	} {
		ev.JobStateChanged.Publish(e)
	}
	ev.StaleReport.Publish(actors.StaleReport{})
	ev.JobRequeued.Publish(actors.JobRequeued{})
	ev.RenderFinished.Publish(actors.RenderFinished{Engine: "lottie", Took: 3 * time.Second})
	ev.JobsRemoved.Publish(actors.JobsRemoved{Jobs: []*persistence.Job{
		{State: persistence.JobFinished}, {State: persistence.JobFinished, Kind: persistence.KindChunk}}, Batches: 1})

	for name, c := range map[string]struct{ got, want float64 }{
		"created":              {testutil.ToFloat64(m.transitions.WithLabelValues("created")), 2},
		"finished":             {testutil.ToFloat64(m.transitions.WithLabelValues("finished")), 1},
		"stale reports":        {testutil.ToFloat64(m.staleReports), 1},
		"requeues":             {testutil.ToFloat64(m.requeues), 1},
		"jobs removed":         {testutil.ToFloat64(m.removed.WithLabelValues("jobs")), 1},
		"batches removed":      {testutil.ToFloat64(m.removed.WithLabelValues("batches")), 1},
		"lottie renders timed": {float64(testutil.CollectAndCount(m.renderDuration)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
}

// farmSource is a coordinator as the scrape-time gauges see it; nodes is nil while not leading.
type farmSource struct {
	nodes []actors.NodeInfo
}

func (f farmSource) QueueStats() (actors.QueueStats, error) {
	if f.nodes == nil {
		return actors.QueueStats{}, actors.ErrNotLeading
	}
	return actors.QueueStats{Depth: map[string]int{"lottie": 3}}, nil
}
func (f farmSource) LiveJobActors() int                     { return 0 }
func (f farmSource) Capacities() map[string]actors.Capacity { return nil }
func (f farmSource) Nodes() []actors.NodeInfo               { return f.nodes }

// What the farm holds is read when scraped: jobs by state from the records, nodes by state and
// the queue from the coordinator while it leads (none while it follows), the data folder's disk.
func TestGaugesAreReadWhenScraped(t *testing.T) {
	counts := map[persistence.JobState]int{persistence.JobQueued: 3, persistence.JobFinished: 7}
	scrape := func(source farmSource) string {
		m := New()
		m.WatchJobCounts(func() map[persistence.JobState]int { return counts })
		m.WatchQueue(source, time.Now)
		m.WatchDisk(func() (uint64, uint64, error) { return 25, 100, nil })
		rec := httptest.NewRecorder()
		m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	leading := scrape(farmSource{nodes: []actors.NodeInfo{{ID: "n1", State: actors.NodeReady}, {ID: "n2", State: actors.NodeLost}, {ID: "n3", State: actors.NodeLost}}})
	for _, line := range []string{`framefarm_jobs{state="queued"} 3`, `framefarm_jobs{state="finished"} 7`, `framefarm_jobs{state="error"} 0`,
		`framefarm_nodes{state="ready"} 1`, `framefarm_nodes{state="lost"} 2`, `framefarm_nodes{state="draining"} 0`,
		`framefarm_queue_depth{engine="lottie"} 3`, "framefarm_data_free_bytes 25", "framefarm_data_size_bytes 100"} {
		if !strings.Contains(leading, "\n"+line+"\n") {
			t.Errorf("a leading coordinator's metrics lack %s", line)
		}
	}
	following := scrape(farmSource{})
	if !strings.Contains(following, `framefarm_jobs{state="finished"} 7`) || strings.Contains(following, "framefarm_nodes{") || strings.Contains(following, "framefarm_queue_depth{") {
		t.Errorf("a following replica reports the records' jobs and no nodes or queue:\n%s", following)
	}
}
