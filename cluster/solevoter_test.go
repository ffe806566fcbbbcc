package cluster_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testutil"
)

// TestSoleVoterLeadsWithoutWaiting: a node that is the only voter of its
// configuration (a one-node cluster: serve --dev, or --bootstrap before
// anyone joins) campaigns at once, at its first start and at a restart.
// raft would first wait a heartbeat timeout for a leader (1 s, drawn from
// 1-2 s), though nobody else can lead a configuration of one voter: the
// node answered nothing for that long after every start.
func TestSoleVoterLeadsWithoutWaiting(t *testing.T) {
	dir := t.TempDir()
	for _, start := range []string{"first start", "restart"} {
		opened := time.Now()
		n, err := cluster.Open(cluster.Config{NodeID: "solo", DataDir: dir, RaftAddr: "127.0.0.1:0", Bootstrap: true,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 5*time.Second, "leader", func() bool { return n.Raft().State() == raft.Leader })
		// Without the early campaign, raft cannot lead before a full
		// heartbeat timeout has passed.
		if took := time.Since(opened); took >= time.Second {
			t.Errorf("%s: leader after %v, want before the 1 s heartbeat timeout", start, took.Round(time.Millisecond))
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
