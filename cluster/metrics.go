package cluster

import (
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/store"
)

// metrics are the node's Prometheus series. Gauges that mirror raft or the
// state machine are read at scrape time (GaugeFunc), so the hot path pays
// only for the counters and histograms it updates.
type metrics struct {
	leaderChanges prometheus.Counter
	expired       prometheus.Counter
	applyBatch    prometheus.Histogram
	snapshot      prometheus.Histogram
	proposalSize  prometheus.Histogram
}

// registerMetrics registers the node's series with reg (nil: none).
func (n *Node) registerMetrics(reg prometheus.Registerer) {
	m := &metrics{
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemnode_leader_changes_total",
			Help: "Leadership changes this node observed (gained or lost)."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemnode_expired_records_total",
			Help: "Records deleted by Expire entries this node proposed as leader."}),
		applyBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "idemnode_fsm_apply_batch_entries",
			Help: "Log entries the state machine applied per batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "idemnode_snapshot_persist_seconds",
			Help: "Time to record a Raft snapshot: making the store durable (a memtable flush).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		proposalSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "idemnode_proposal_commands",
			Help: "Commands the leader proposed together in one log entry (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
	}
	n.metrics = m
	if reg == nil {
		return
	}
	gauges := []prometheus.Collector{
		m.leaderChanges, m.expired, m.applyBatch, m.snapshot, m.proposalSize,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_raft_state",
			Help: "Raft state: 0 follower, 1 candidate, 2 leader, 3 shutdown."},
			func() float64 { return float64(n.raft.State()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_raft_term", Help: "Current Raft term."},
			func() float64 { return float64(n.raft.CurrentTerm()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_raft_commit_index", Help: "Raft commit index."},
			func() float64 { return float64(n.raft.CommitIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_raft_applied_index",
			Help: "Index of the last log entry the state machine applied."},
			func() float64 { return float64(n.Machine().Applied()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_records_pending", Help: "Stored PENDING records."},
			func() float64 { p, _ := n.Machine().Counts(); return float64(p) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_records_completed", Help: "Stored COMPLETED records."},
			func() float64 { _, c := n.Machine().Counts(); return float64(c) }),
	}
	gauges = append(gauges, store.NewCollector(func() *store.Store {
		s, _ := n.Machine().Store().(*store.Store)
		return s
	}))
	for _, c := range gauges {
		reg.MustRegister(c)
	}
}

// timedSnapshot measures how long Persist takes.
type timedSnapshot struct {
	raft.FSMSnapshot
	hist prometheus.Histogram
}

func (s timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	defer func() { s.hist.Observe(time.Since(start).Seconds()) }()
	return s.FSMSnapshot.Persist(sink)
}
