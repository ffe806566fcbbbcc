package cluster

import (
	"fmt"
	"slices"

	gometrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// ExportRaftMetrics publishes the few of hashicorp/raft's own timings that
// show where a commit round goes — the round itself, the leader's and the
// followers' log appends, replication round trips, FSM apply — as
// Prometheus histograms (docs/OPERATIONS.md). raft reports through one
// process-wide registry (armon/go-metrics), so call this once per process,
// before the node opens.
//
// A sink of our own rather than go-metrics' Prometheus sink: that one keeps
// every key raft and memberlist emit, each as a summary whose Observe feeds
// five quantile streams, and it cost 2–3 % of a node's CPU under the claim
// benchmark. Here an unwanted key costs a slice comparison, a wanted one a
// histogram bucket increment.
func ExportRaftMetrics(reg prometheus.Registerer) error {
	sink := newRaftTimings()
	for _, t := range sink.timings {
		if err := reg.Register(t.hist); err != nil {
			return fmt.Errorf("raft metrics: %w", err)
		}
	}
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}

// raftTiming maps one raft sample key onto one histogram.
type raftTiming struct {
	key  []string
	hist *prometheus.HistogramVec
	// peer means the sample carries raft's peer_id label.
	peer bool
}

// raftTimings is a go-metrics sink that keeps only the timings in timings.
type raftTimings struct {
	gometrics.BlackholeSink
	timings []raftTiming
}

func newRaftTimings() *raftTimings {
	// 50 µs to 1.6 s: an fsync on a fast disk to an election's worth.
	buckets := prometheus.ExponentialBuckets(50e-6, 2, 16)
	timing := func(name, help string, peer bool, key ...string) raftTiming {
		var labels []string
		if peer {
			labels = []string{"peer"}
		}
		hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		if !peer {
			hist.WithLabelValues() // exported from the start, before raft's first sample
		}
		return raftTiming{key: key, peer: peer, hist: hist}
	}
	return &raftTimings{timings: []raftTiming{
		timing("idemnode_raft_commit_seconds",
			"Leader: from appending an entry to a quorum having it (one commit round).", false, "raft", "commitTime"),
		timing("idemnode_raft_leader_append_seconds",
			"Leader: its own log append (write and sync), before replication starts.", false, "raft", "leader", "dispatchLog"),
		timing("idemnode_raft_follower_append_seconds",
			"Follower: the log append of one AppendEntries.", false, "raft", "rpc", "appendEntries", "storeLogs"),
		timing("idemnode_raft_replication_seconds",
			"Leader: one AppendEntries round trip to a follower, its append included.", true, "raft", "replication", "appendEntries", "rpc"),
		timing("idemnode_raft_fsm_apply_seconds",
			"Applying one batch of committed entries to the state machine.", false, "raft", "fsm", "applyBatch"),
	}}
}

// AddSample and AddSampleWithLabels receive raft's timers, in milliseconds.
func (s *raftTimings) AddSample(key []string, ms float32) { s.AddSampleWithLabels(key, ms, nil) }

func (s *raftTimings) AddSampleWithLabels(key []string, ms float32, labels []gometrics.Label) {
	for _, t := range s.timings {
		if !slices.Equal(key, t.key) {
			continue
		}
		if !t.peer {
			t.hist.WithLabelValues().Observe(float64(ms) / 1e3)
			return
		}
		// raft reports each peer twice, once with the peer in the key (one
		// element longer, so it does not match) and once as this label.
		for _, l := range labels {
			if l.Name == "peer_id" {
				t.hist.WithLabelValues(l.Value).Observe(float64(ms) / 1e3)
			}
		}
		return
	}
}
