package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
)

// The metrics follow what the actors publish: jobs by state as they move (a split job's chunks
// left out, as the store's counts leave them), transitions, nodes by state, retention's removals.
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
	ev.NodeStateChanged.Publish(actors.NodeStateChanged{Node: "n1", To: actors.NodeReady})
	ev.NodeStateChanged.Publish(actors.NodeStateChanged{Node: "n1", From: actors.NodeReady, To: actors.NodeLost})
	ev.JobsRemoved.Publish(actors.JobsRemoved{Jobs: []*persistence.Job{
		{State: persistence.JobFinished}, {State: persistence.JobFinished, Kind: persistence.KindChunk}}, Batches: 1})

	for name, c := range map[string]struct{ got, want float64 }{
		"queued jobs":          {testutil.ToFloat64(m.jobs.WithLabelValues("queued")), 1},
		"rendering jobs":       {testutil.ToFloat64(m.jobs.WithLabelValues("render:dorender")), 0},
		"finished jobs":        {testutil.ToFloat64(m.jobs.WithLabelValues("finished")), 0},
		"created":              {testutil.ToFloat64(m.transitions.WithLabelValues("created")), 2},
		"finished":             {testutil.ToFloat64(m.transitions.WithLabelValues("finished")), 1},
		"stale reports":        {testutil.ToFloat64(m.staleReports), 1},
		"requeues":             {testutil.ToFloat64(m.requeues), 1},
		"ready nodes":          {testutil.ToFloat64(m.nodes.WithLabelValues("ready")), 0},
		"lost nodes":           {testutil.ToFloat64(m.nodes.WithLabelValues("lost")), 1},
		"jobs removed":         {testutil.ToFloat64(m.removed.WithLabelValues("jobs")), 1},
		"batches removed":      {testutil.ToFloat64(m.removed.WithLabelValues("batches")), 1},
		"lottie renders timed": {float64(testutil.CollectAndCount(m.renderDuration)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
}
