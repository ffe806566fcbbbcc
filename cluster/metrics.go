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
	leaderChanges    prometheus.Counter
	expired          prometheus.Counter
	applyBatch       prometheus.Histogram
	snapshot         prometheus.Histogram
	snapshotFailures *prometheus.CounterVec
	restores         prometheus.Counter
	proposalSize     prometheus.Histogram
	// tombstonesWithheld counts Claims and Completes proposed without their
	// tombstone time because a voter runs an older release.
	tombstonesWithheld prometheus.Counter
	// foreignRefused counts Raft connections refused because the peer
	// holds another cluster's state (peerhandshake.go).
	foreignRefused prometheus.Counter
}

// The stages a snapshot can fail in (idemnode_snapshot_failures_total).
const (
	stageCreate  = "create"
	stagePersist = "persist"
	stageRestore = "restore"
	// stageSend: streaming the store to a follower (InstallSnapshot) broke.
	stageSend = "send"
	// stageInstall: a stream from the leader broke, came short or could
	// not be built into a new store.
	stageInstall = "install"
)

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
		snapshotFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemnode_snapshot_failures_total",
			Help: "Snapshots that failed, by stage: create (capturing the state), persist (recording it), send (streaming it to a follower), install (receiving one from the leader), restore (swapping one in)."},
			[]string{"stage"}),
		restores: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemnode_snapshot_restores_total",
			Help: "Snapshots this node restored: installed from the leader, or loaded at start."}),
		proposalSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "idemnode_proposal_commands",
			Help: "Commands the leader proposed together in one log entry (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		tombstonesWithheld: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemnode_tombstones_withheld_total",
			Help: "Claims and completes this leader proposed without their tombstone time: a voter runs a release without tombstones."}),
		foreignRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemnode_raft_foreign_connections_refused_total",
			Help: "Raft connections, dialed or accepted, refused because the peer holds the state of another cluster (its identity differs)."}),
	}
	// Every stage exists from the start, so an alert on its increase sees
	// the first failure rather than a series appearing.
	for _, stage := range []string{stageCreate, stagePersist, stageSend, stageInstall, stageRestore} {
		m.snapshotFailures.WithLabelValues(stage)
	}
	n.metrics = m
	n.snaps.failed = func(stage string) { m.snapshotFailures.WithLabelValues(stage).Inc() }
	if reg == nil {
		return
	}
	collectors := []prometheus.Collector{
		m.leaderChanges, m.expired, m.applyBatch, m.snapshot, m.snapshotFailures, m.restores, m.proposalSize, m.tombstonesWithheld, m.foreignRefused,
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_raft_last_contact_seconds",
			Help: "Seconds since this node last heard from a leader; 0 on the leader."}, n.lastContactSeconds),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_raft_voters",
			Help: "Voters in the Raft configuration this node knows."}, n.voters),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_ready",
			Help: "1 when the node is ready (as /readyz): a leader is known and what is committed is applied."},
			func() float64 { return boolGauge(n.Ready() == nil) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_records_pending", Help: "Stored PENDING records."},
			func() float64 { p, _ := n.Machine().Counts(); return float64(p) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_records_completed", Help: "Stored COMPLETED records, and tombstones."},
			func() float64 { _, c := n.Machine().Counts(); return float64(c) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_abandoned_records",
			Help: "PENDING records abandoned now: their lease ran out without a completion or release (idemnode abandoned)."},
			func() float64 { return float64(n.Machine().Meta().Feed.Abandoned) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "idemnode_claims_abandoned_total",
			Help: "Claims whose lease ran out without a completion or release, as the replicated state counts them."},
			func() float64 { return float64(n.Machine().Meta().Feed.Total) }),
	}
	collectors = append(collectors, store.NewCollector(func() *store.Store {
		s, _ := n.Machine().Store().(*store.Store)
		return s
	}))
	collectors = append(collectors, newDiskCollector(n.cfg.DataDir))
	if n.scrub != nil {
		collectors = append(collectors, n.scrub)
	}
	for _, c := range collectors {
		reg.MustRegister(c)
	}
}

// lastContactSeconds is the time since a leader last reached this node:
// 0 on the leader, and since Open on a node that never heard from one.
func (n *Node) lastContactSeconds() float64 {
	if n.raft.State() == raft.Leader {
		return 0
	}
	last := n.raft.LastContact()
	if last.IsZero() {
		last = n.opened
	}
	return time.Since(last).Seconds()
}

// voters counts the voters of the latest Raft configuration (0 while
// raft cannot say, e.g. shutting down).
func (n *Node) voters() float64 {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	count := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			count++
		}
	}
	return float64(count)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// timedSnapshot measures how long Persist takes, and counts its failures.
type timedSnapshot struct {
	raft.FSMSnapshot
	metrics *metrics
}

func (s timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	err := s.FSMSnapshot.Persist(sink)
	s.metrics.snapshot.Observe(time.Since(start).Seconds())
	if err != nil {
		s.metrics.snapshotFailures.WithLabelValues(stagePersist).Inc()
	}
	return err
}
