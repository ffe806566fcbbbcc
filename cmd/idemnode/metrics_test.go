package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	idemserver "github.com/idemnode/idemnode/server"
)

// scrape returns the value of every series on /metrics, keyed by the
// series as printed (name plus labels).
func scrape(t *testing.T, s *server) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.http + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsAfterKnownWorkload runs a known workload through the CLI and
// checks that the counters and gauges on /metrics tell exactly that story.
func TestMetricsAfterKnownWorkload(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	var won, again claimJSON
	for i := range 3 {
		s.cliJSON(0, &won, "claim", "--key", "m"+strconv.Itoa(i), "--fingerprint", "aa", "--owner", "o1")
	}
	s.cliJSON(exitHeld, &again, "claim", "--key", "m0", "--fingerprint", "aa", "--owner", "o2") // in progress
	s.cliJSON(0, &again, "complete", "--key", "m2", "--token", strconv.FormatUint(won.Token, 10))
	s.cliJSON(exitCompleted, &again, "claim", "--key", "m2", "--fingerprint", "aa", "--owner", "o3") // completed
	s.cliJSON(1, &again, "claim", "--key", "m2", "--fingerprint", "bb", "--owner", "o4")             // mismatch

	m := scrape(t, s)
	want := map[string]float64{
		`idemnode_claims_total{outcome="won"}`:                             3,
		`idemnode_claims_total{outcome="in_progress"}`:                     1,
		`idemnode_claims_total{outcome="completed"}`:                       1,
		`idemnode_claims_total{outcome="mismatch"}`:                        1,
		`idemnode_records_pending`:                                         2,
		`idemnode_records_completed`:                                       1,
		`idemnode_raft_state`:                                              2, // leader
		`idemnode_waits_in_progress`:                                       0,
		`idemnode_rpc_duration_seconds_count{code="OK",method="Claim"}`:    6,
		`idemnode_rpc_duration_seconds_count{code="OK",method="Complete"}`: 1,
		`idemnode_ready`:                                                   1,
		`idemnode_raft_voters`:                                             1,
		`idemnode_raft_last_contact_seconds`:                               0, // the leader
		`idemnode_tenant_claims_total{tenant=""}`:                          6, // the default tenant
		`idemnode_tenant_quota_keys`:                                       0,
		`idemnode_snapshot_failures_total{stage="create"}`:                 0,
		`idemnode_snapshot_failures_total{stage="persist"}`:                0,
		`idemnode_snapshot_failures_total{stage="send"}`:                   0,
		`idemnode_snapshot_failures_total{stage="install"}`:                0,
		`idemnode_snapshot_failures_total{stage="restore"}`:                0,
		`go_gc_gomemlimit_bytes`:                                           float64(idemserver.RuntimeMemoryLimit(idemserver.DefaultMemoryLimit)), // --memory-limit's default
	}
	for series, v := range want {
		if got, ok := m[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	if m["idemnode_raft_applied_index"] < 5 || m["idemnode_raft_commit_index"] < m["idemnode_raft_applied_index"] {
		t.Errorf("raft indexes: applied %v commit %v", m["idemnode_raft_applied_index"], m["idemnode_raft_commit_index"])
	}
	if m["idemnode_leader_changes_total"] < 1 || m["idemnode_raft_term"] < 1 {
		t.Errorf("leader changes %v, term %v", m["idemnode_leader_changes_total"], m["idemnode_raft_term"])
	}
	if free, size := m["idemnode_disk_free_bytes"], m["idemnode_disk_size_bytes"]; free <= 0 || free > size {
		t.Errorf("disk free %v of %v bytes", free, size)
	}
	if m["idemnode_fsm_apply_batch_entries_count"] < 1 {
		t.Errorf("no FSM apply batches observed")
	}
	// raft's own timings: every claim and complete above was one commit
	// round with a log append on this single node.
	for _, series := range []string{"idemnode_raft_commit_seconds_count", "idemnode_raft_leader_append_seconds_count", "idemnode_raft_fsm_apply_seconds_count"} {
		if m[series] < 5 {
			t.Errorf("%s = %v, want at least the 5 writes above", series, m[series])
		}
	}
}
