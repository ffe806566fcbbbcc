package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// BenchmarkFailover measures how long writes are unavailable when the
// leader crashes: from the crash until a claim sent to a surviving node
// succeeds. One iteration is one crash; run it with -benchtime 20x for a
// distribution. It reports the median and the worst in milliseconds.
func BenchmarkFailover(b *testing.B) {
	c := testcluster.Start(b, 3, testcluster.Options{})
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		leader := c.WaitLeader(30 * time.Second)
		c.WaitConverged(30 * time.Second)
		var survivor *testcluster.Node
		for _, nd := range c.Running() {
			if nd != leader {
				survivor = nd
				break
			}
		}
		start := time.Now()
		c.Crash(leader)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			resp, err := survivor.Client().Claim(ctx, claimReq(fmt.Sprintf("failover-%d", i), "o"))
			cancel()
			if err == nil && resp.Outcome == idempb.Outcome_OUTCOME_WON {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("no write succeeded within a minute of the crash: %v", err)
			}
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		c.Restart(leader)
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
	b.Logf("failover times: %v", took)
}
