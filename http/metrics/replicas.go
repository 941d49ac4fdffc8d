package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// replicaMetrics are those of a coordinator that is one of several replicas.
type replicaMetrics struct {
	commit, apply prometheus.Histogram
	applied       prometheus.Counter
	snapshotBytes prometheus.Gauge
	snapshot      prometheus.Histogram
	leaderChanges prometheus.Counter
}

func newReplicaMetrics() *replicaMetrics {
	latency := []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 5}
	return &replicaMetrics{
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "framefarm_replica_commit_seconds",
			Help: "On the leader, from a group of writes handed to the replicas to its entry committed and applied here.", Buckets: latency}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "framefarm_replica_apply_seconds",
			Help: "Applying committed entries to this replica's store (one transaction for those that came together).", Buckets: latency}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "framefarm_replica_entries_applied_total",
			Help: "Entries of the replicated log this replica applied."}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "framefarm_replica_snapshot_bytes",
			Help: "Size of the last snapshot this replica wrote (its store's file)."}),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "framefarm_replica_snapshot_seconds",
			Help: "Writing a snapshot.", Buckets: []float64{0.01, 0.1, 0.5, 1, 5, 15, 60, 300}}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "framefarm_replica_leader_changes_total",
			Help: "Times this replica saw another leader (or none) take the place of the one it knew."}),
	}
}

// ReplicaSource reports a replica's state at scrape time.
type ReplicaSource interface {
	// Raft is the replica's state (leader, follower, candidate), term and applied index.
	Raft() (state string, term, applied uint64)
}

var (
	replicaStateDesc   = prometheus.NewDesc("framefarm_replica_state", "1 for this replica's raft state (leader, follower, candidate).", []string{"state"}, nil)
	replicaTermDesc    = prometheus.NewDesc("framefarm_replica_term", "The raft term this replica is in.", nil, nil)
	replicaAppliedDesc = prometheus.NewDesc("framefarm_replica_applied_index", "The last entry of the replicated log applied to this replica's store.", nil, nil)
)

type replicaCollector struct{ src ReplicaSource }

func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicaStateDesc
	ch <- replicaTermDesc
	ch <- replicaAppliedDesc
}

func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	state, term, applied := c.src.Raft()
	for _, s := range []string{"leader", "follower", "candidate"} {
		v := 0.0
		if s == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(replicaStateDesc, prometheus.GaugeValue, v, s)
	}
	ch <- prometheus.MustNewConstMetric(replicaTermDesc, prometheus.GaugeValue, float64(term))
	ch <- prometheus.MustNewConstMetric(replicaAppliedDesc, prometheus.GaugeValue, float64(applied))
}

// ForReplica adds the metrics of what a replica does (ObserveReplicated and the others), before
// it starts; WatchReplica those of its state, read at scrape time, once it runs.
func (m *Metrics) ForReplica() {
	m.replica = newReplicaMetrics()
	r := m.replica
	m.reg.MustRegister(r.commit, r.apply, r.applied, r.snapshotBytes, r.snapshot, r.leaderChanges)
}

// WatchReplica adds a running replica's state to the metrics.
func (m *Metrics) WatchReplica(src ReplicaSource) { m.reg.MustRegister(replicaCollector{src}) }

// ObserveReplicated records a group of writes committed and applied on the leader, after d.
func (m *Metrics) ObserveReplicated(d time.Duration) { m.replica.commit.Observe(d.Seconds()) }

// ObserveApply records entries applied to the store in d.
func (m *Metrics) ObserveApply(d time.Duration, entries int) {
	m.replica.apply.Observe(d.Seconds())
	m.replica.applied.Add(float64(entries))
}

// ObserveSnapshot records a snapshot of bytes written in d.
func (m *Metrics) ObserveSnapshot(bytes int64, d time.Duration) {
	m.replica.snapshotBytes.Set(float64(bytes))
	m.replica.snapshot.Observe(d.Seconds())
}

// LeaderChanged records that the leader this replica knew gave way.
func (m *Metrics) LeaderChanged() { m.replica.leaderChanges.Inc() }
