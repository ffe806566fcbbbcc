package cluster

import (
	"testing"

	gometrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRaftTimingsKeepsItsFiveTimings feeds the sink what raft emits: the
// wanted timers (milliseconds), raft's second copy of each per-peer timer
// with the peer in the key, and keys nobody asked for. Each histogram must
// count exactly its own samples, in seconds, per peer where raft names one.
func TestRaftTimingsKeepsItsFiveTimings(t *testing.T) {
	s := newRaftTimings()
	reg := prometheus.NewRegistry()
	for _, tm := range s.timings {
		reg.MustRegister(tm.hist)
	}
	peer := func(id string) []gometrics.Label { return []gometrics.Label{{Name: "peer_id", Value: id}} }

	s.AddSample([]string{"raft", "commitTime"}, 4)
	s.AddSample([]string{"raft", "commitTime"}, 2)
	s.AddSample([]string{"raft", "leader", "dispatchLog"}, 1.5)
	s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 3, peer("n2"))
	s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 5, peer("n3"))
	// raft's legacy copies of the same two samples, peer in the key.
	s.AddSample([]string{"raft", "replication", "appendEntries", "rpc", "n2"}, 3)
	s.AddSample([]string{"raft", "replication", "appendEntries", "rpc", "n3"}, 5)
	// Unwanted keys, as raft and memberlist emit them.
	s.AddSample([]string{"raft", "fsm", "enqueue"}, 1)
	s.AddSample([]string{"memberlist", "gossip"}, 1)
	s.IncrCounter([]string{"raft", "apply"}, 1)
	s.SetGauge([]string{"raft", "peers"}, 3)

	want := map[string]int{
		"idemnode_raft_commit_seconds":          2,
		"idemnode_raft_leader_append_seconds":   1,
		"idemnode_raft_follower_append_seconds": 0,
		"idemnode_raft_replication_seconds":     2,
		"idemnode_raft_fsm_apply_seconds":       0,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got, series := map[string]int{}, map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
		for _, m := range f.GetMetric() {
			got[f.GetName()] += int(m.GetHistogram().GetSampleCount())
			if f.GetName() == "idemnode_raft_commit_seconds" && m.GetHistogram().GetSampleSum() != 0.006 {
				t.Errorf("commit sum %v s, want 0.006 (4 ms + 2 ms)", m.GetHistogram().GetSampleSum())
			}
		}
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s counted %d samples, want %d", name, got[name], n)
		}
	}
	if n := series["idemnode_raft_replication_seconds"]; n != 2 {
		t.Errorf("replication has %d peer series, want 2 (n2, n3)", n)
	}
}
