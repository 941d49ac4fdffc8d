// Package metrics exposes the coordinator's Prometheus metrics: jobs by state, created /
// finished / failed / cancelled counters, queue depth and oldest queued age, render durations,
// HTTP latency by route and code, webhook deliveries, store commit latency, the data folder's
// disk, and the render nodes: nodes by state, slots per engine, assignment latency, lease
// expiries, fenced reports, requeues, renders per node.
//
// What the farm holds is read when scraped, so every replica tells it true: jobs by state from
// its own records (each replica reports the farm's: aggregate them with max), the queue, slots and
// nodes from the coordinator of the term it leads (only the leader reports them). Counters count
// what happened in this process.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
)

// Metrics holds every collector of the coordinator, in its own registry.
type Metrics struct {
	reg            *prometheus.Registry
	transitions    *prometheus.CounterVec
	renderDuration *prometheus.HistogramVec
	httpDuration   *prometheus.HistogramVec
	webhooks       *prometheus.CounterVec
	commitDuration prometheus.Histogram
	commitWrites   prometheus.Histogram
	staleReports   prometheus.Counter
	requeues       prometheus.Counter
	templates      *prometheus.CounterVec
	reinspections  prometheus.Counter
	passivations   prometheus.Counter
	removed        *prometheus.CounterVec
	assignLatency  prometheus.Histogram
	leaseExpiries  prometheus.Counter
	nodeRenders    *prometheus.CounterVec
	refused        *prometheus.CounterVec
	objectRequests *prometheus.HistogramVec
	objectErrors   *prometheus.CounterVec
	objects        *prometheus.GaugeVec
	objectBytes    *prometheus.GaugeVec
	network        *prometheus.CounterVec
	// replica is set for a coordinator that is one of several replicas (WatchReplica).
	replica *replicaMetrics
}

// New registers the collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_jobs_total", Help: "Jobs that reached a state: created, finished, failed, cancelled.",
		}, []string{"event"}),
		renderDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "framefarm_render_duration_seconds", Help: "Duration of successful renders.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
		}, []string{"engine"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "framefarm_http_request_duration_seconds", Help: "HTTP request latency by route and status code.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10},
		}, []string{"route", "method", "code"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_webhook_deliveries_total", Help: "Webhook delivery attempts by result: delivered, retrying, failed.",
		}, []string{"result"}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "framefarm_store_commit_duration_seconds", Help: "Duration of one group commit, fsync included.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1},
		}),
		commitWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "framefarm_store_commit_writes", Help: "Writes carried by one group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		staleReports: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "framefarm_stale_reports_total", Help: "Node reports rejected because their attempt was no longer current.",
		}),
		requeues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "framefarm_requeues_total", Help: "Jobs queued again after an attempt was lost.",
		}),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_retention_removed_total", Help: "Records retention removed: jobs (with their logs and outputs) and batches.",
		}, []string{"record"}),
		passivations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "framefarm_job_actor_passivations_total", Help: "Job actors stopped once idle (their records stay in the store).",
		}),
		templates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_template_transitions_total", Help: "Templates that reached a status.",
		}, []string{"status"}),
		reinspections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "framefarm_template_reinspections_total", Help: "Uploaded templates read again at start by a newer inspector.",
		}),
		assignLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "framefarm_assignment_latency_seconds", Help: "Time from a job queued to its assignment sent to a node.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 5, 30, 300, 900, 3600, 14400},
		}),
		leaseExpiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "framefarm_node_lease_expiries_total", Help: "Render nodes lost because their heartbeats stopped.",
		}),
		nodeRenders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_node_renders_total", Help: "Renders each node finished or failed.",
		}, []string{"node", "result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_node_messages_refused_total",
			Help: "Node messages refused, by reason: payload (could not be opened), hello, identity (a certificate of another), session, attempt (a report of an attempt the node does not hold).",
		}, []string{"reason"}),
		objectRequests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "framefarm_object_store_request_seconds", Help: "Requests the coordinator made of the object store, by operation.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60},
		}, []string{"op"}),
		objectErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_object_store_errors_total", Help: "Requests to the object store that failed, by operation.",
		}, []string{"op"}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "framefarm_objects", Help: "Objects the farm stores, by kind (templates, fonts, outputs), as last counted.",
		}, []string{"kind"}),
		objectBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "framefarm_object_bytes", Help: "Bytes the farm's objects hold, by kind, as last counted.",
		}, []string{"kind"}),
		network: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "framefarm_network_bytes_total",
			Help: "Bytes the coordinator received and sent, by link: api (its HTTP port, files included), nodes (messages with remote render nodes), objects (its own requests to the object store).",
		}, []string{"link", "direction"}),
	}
	m.reg.MustRegister(m.transitions, m.renderDuration, m.httpDuration, m.webhooks, m.commitDuration,
		m.commitWrites, m.staleReports, m.requeues, m.templates, m.reinspections, m.passivations, m.removed,
		m.assignLatency, m.leaseExpiries, m.nodeRenders, m.refused, m.objectRequests, m.objectErrors, m.objects, m.objectBytes,
		m.network, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, ev := range []string{"created", "finished", "failed", "cancelled"} {
		m.transitions.WithLabelValues(ev)
	}
	// Series from the start, so that a first failure is an increase to alert on.
	for _, result := range []string{"delivered", "retrying", "failed"} {
		m.webhooks.WithLabelValues(result)
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(m.HTTPHandler())
}

// HTTPHandler is the same page for a net/http listener of its own.
func (m *Metrics) HTTPHandler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Watch subscribes the metrics to what the actors do.
func (m *Metrics) Watch(ev *actors.Events) {
	ev.JobStateChanged.Subscribe(m.jobStateChanged)
	ev.JobActorStopped.Subscribe(func(actors.JobActorStopped) { m.passivations.Inc() })
	ev.JobsRemoved.Subscribe(m.jobsRemoved)
	ev.TemplateStatusChanged.Subscribe(func(e actors.TemplateStatusChanged) { m.templates.WithLabelValues(string(e.Status)).Inc() })
	ev.TemplateReinspected.Subscribe(func(actors.TemplateReinspected) { m.reinspections.Inc() })
	ev.RenderFinished.Subscribe(func(e actors.RenderFinished) { m.renderDuration.WithLabelValues(e.Engine).Observe(e.Took.Seconds()) })
	ev.StaleReport.Subscribe(func(actors.StaleReport) { m.staleReports.Inc() })
	ev.JobRequeued.Subscribe(func(actors.JobRequeued) { m.requeues.Inc() })
	ev.Assigned.Subscribe(func(e actors.Assigned) { m.assignLatency.Observe(e.Waited.Seconds()) })
	ev.NodeRendered.Subscribe(m.nodeRendered)
	ev.LeaseExpired.Subscribe(func(actors.LeaseExpired) { m.leaseExpiries.Inc() })
	ev.NodeMessageRefused.Subscribe(func(e actors.NodeMessageRefused) { m.refused.WithLabelValues(e.Why).Inc() })
	ev.WebhookAttempted.Subscribe(func(e actors.WebhookAttempted) { m.webhooks.WithLabelValues(e.Result).Inc() })
}

func (m *Metrics) jobStateChanged(e actors.JobStateChanged) {
	if e.Chunk { // its job counts, as the store's counts do
		return
	}
	if e.From == 0 {
		m.transitions.WithLabelValues("created").Inc()
	}
	switch e.To {
	case persistence.JobFinished:
		m.transitions.WithLabelValues("finished").Inc()
	case persistence.JobFailed:
		m.transitions.WithLabelValues("failed").Inc()
	case persistence.JobCancelled:
		m.transitions.WithLabelValues("cancelled").Inc()
	}
}

// jobsRemoved counts what retention removed.
func (m *Metrics) jobsRemoved(e actors.JobsRemoved) {
	jobs := 0
	for _, j := range e.Jobs {
		if j.Kind != persistence.KindChunk {
			jobs++
		}
	}
	m.removed.WithLabelValues("jobs").Add(float64(jobs))
	m.removed.WithLabelValues("batches").Add(float64(e.Batches))
}

func (m *Metrics) nodeRendered(e actors.NodeRendered) {
	result := "failed"
	if e.OK {
		result = "finished"
	}
	m.nodeRenders.WithLabelValues(e.Node, result).Inc()
}

// ObserveRequest records one HTTP request. Methods outside HTTP's usual ones are counted as
// OTHER: a label per made-up method would let anyone grow /metrics without bound.
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	switch method {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
	default:
		method = "OTHER"
	}
	m.httpDuration.WithLabelValues(route, method, strconv.Itoa(status)).Observe(d.Seconds())
}

// ObserveObjectRequest records one request to the object store.
func (m *Metrics) ObserveObjectRequest(op string, took time.Duration, err error) {
	m.objectRequests.WithLabelValues(op).Observe(took.Seconds())
	errs := m.objectErrors.WithLabelValues(op) // a series from the first request, so its rate reads 0, not nothing
	if err != nil {
		errs.Inc()
	}
}

// SetObjectUsage records what one kind of object holds.
func (m *Metrics) SetObjectUsage(kind string, objects, bytes int64) {
	m.objects.WithLabelValues(kind).Set(float64(objects))
	m.objectBytes.WithLabelValues(kind).Set(float64(bytes))
}

// Traffic counts the bytes one link of the coordinator receives and sends.
type Traffic struct{ received, sent prometheus.Counter }

func (t Traffic) Received(n int) { t.received.Add(float64(n)) }
func (t Traffic) Sent(n int)     { t.sent.Add(float64(n)) }

// Network is the traffic of one link: api, nodes or objects.
func (m *Metrics) Network(link string) Traffic {
	return Traffic{received: m.network.WithLabelValues(link, "received"), sent: m.network.WithLabelValues(link, "sent")}
}

// ObserveCommit records one group commit of the store.
func (m *Metrics) ObserveCommit(d time.Duration, writes int) {
	m.commitDuration.Observe(d.Seconds())
	m.commitWrites.Observe(float64(writes))
}

// QueueSource reports the queue, the render slots and the nodes at scrape time (a replica that
// does not lead reports none).
type QueueSource interface {
	QueueStats() (actors.QueueStats, error)
	LiveJobActors() int
	Capacities() map[string]actors.Capacity
	Nodes() []actors.NodeInfo
}

// WatchQueue adds the queue depth, oldest queued age, live actor, slot and node gauges, read at
// scrape time.
func (m *Metrics) WatchQueue(src QueueSource, now func() time.Time) {
	m.reg.MustRegister(&queueCollector{src: src, now: now})
}

var (
	queueDepthDesc = prometheus.NewDesc("framefarm_queue_depth", "Queued jobs by engine.", []string{"engine"}, nil)
	oldestDesc     = prometheus.NewDesc("framefarm_queue_oldest_age_seconds", "Age of the oldest queued job.", nil, nil)
	liveDesc       = prometheus.NewDesc("framefarm_job_actors_live", "Job actors in memory (a job has one only while something happens to it).", nil, nil)
	slotsDesc      = prometheus.NewDesc("framefarm_slots", "Render slots of the ready nodes by engine: total and busy.", []string{"engine", "kind"}, nil)
	nodesDesc      = prometheus.NewDesc("framefarm_nodes", "Render nodes by state (reported by the coordinator that leads).", []string{"state"}, nil)
	jobsDesc       = prometheus.NewDesc("framefarm_jobs", "Jobs by state, from this replica's records (every replica reports the farm's).", []string{"state"}, nil)
	diskFreeDesc   = prometheus.NewDesc("framefarm_data_free_bytes", "Bytes free to the coordinator on the data folder's file system.", nil, nil)
	diskSizeDesc   = prometheus.NewDesc("framefarm_data_size_bytes", "Size of the data folder's file system.", nil, nil)
)

type queueCollector struct {
	src QueueSource
	now func() time.Time
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- oldestDesc
	ch <- liveDesc
	ch <- slotsDesc
	ch <- nodesDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, float64(c.src.LiveJobActors()))
	for engine, cp := range c.src.Capacities() {
		ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(cp.Slots), engine, "total")
		ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(cp.Slots-cp.Free), engine, "busy")
	}
	if nodes := c.src.Nodes(); nodes != nil { // nil: not leading
		count := map[actors.NodeState]int{}
		for _, n := range nodes {
			count[n.State]++
		}
		for _, st := range actors.NodeStates {
			ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(count[st]), string(st))
		}
	}
	stats, err := c.src.QueueStats()
	if err != nil {
		return
	}
	for engine, n := range stats.Depth {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(n), engine)
	}
	age := 0.0
	if !stats.OldestQueued.IsZero() {
		age = c.now().Sub(stats.OldestQueued).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
}

// WatchJobCounts adds the jobs-by-state gauge, read from the records at scrape time.
func (m *Metrics) WatchJobCounts(counts func() map[persistence.JobState]int) {
	m.reg.MustRegister(jobCountCollector(counts))
}

type jobCountCollector func() map[persistence.JobState]int

func (c jobCountCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c jobCountCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c()
	for _, s := range persistence.AllJobStates {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[s]), s.String())
	}
}

// WatchDisk adds the data folder's free and total bytes, read at scrape time (none when space
// cannot tell).
func (m *Metrics) WatchDisk(space func() (free, size uint64, err error)) {
	m.reg.MustRegister(diskCollector(space))
}

type diskCollector func() (free, size uint64, err error)

func (c diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- diskFreeDesc
	ch <- diskSizeDesc
}

func (c diskCollector) Collect(ch chan<- prometheus.Metric) {
	free, size, err := c()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(free))
	ch <- prometheus.MustNewConstMetric(diskSizeDesc, prometheus.GaugeValue, float64(size))
}
