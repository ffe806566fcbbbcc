package cluster

import (
	"fmt"

	gometrics "github.com/armon/go-metrics"
	gometricsprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// ExportRaftMetrics publishes hashicorp/raft's own measurements — commit
// time, the leader's and followers' log appends, replication round trips,
// FSM apply — as Prometheus summaries named idemnode_raft_*, with the
// median, p90 and p99 of the last 10 s. They show where a commit round
// goes, which the node's own series cannot (docs/OPERATIONS.md). raft
// reports through one process-wide registry, so call this once per
// process, before the node opens; gossip's measurements are left out.
func ExportRaftMetrics(reg prometheus.Registerer) error {
	sink, err := gometricsprom.NewPrometheusSinkFrom(gometricsprom.PrometheusOpts{
		Registerer: reg,
		Name:       "idemnode_raft_sink",
	})
	if err != nil {
		return fmt.Errorf("raft metrics sink: %w", err)
	}
	cfg := gometrics.DefaultConfig("idemnode")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false // the Go collector reports these
	cfg.FilterDefault = false
	cfg.AllowedPrefixes = []string{"idemnode.raft."}
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}
