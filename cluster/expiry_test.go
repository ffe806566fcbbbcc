package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testclock"
	"github.com/idemnode/idemnode/internal/testutil"
)

// mustSingleNode opens a standalone one-node cluster on a temp dir.
func mustSingleNode(t *testing.T, tune func(*cluster.Config)) *cluster.Node {
	t.Helper()
	cfg := cluster.Config{NodeID: "solo", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true,
		ExpiryInterval: 50 * time.Millisecond}
	if tune != nil {
		tune(&cfg)
	}
	n, err := cluster.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	testutil.Eventually(t, 10*time.Second, "leader ready", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return n.LinearizableBarrier(ctx)
	})
	return n
}

// TestExpiryTickerDeletesExpiredRecords: records disappear at their TTL
// through the leader's Expire proposals, in bounded batches, with no
// external trigger: the node's clock passing the TTL is all it takes.
func TestExpiryTickerDeletesExpiredRecords(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Now())
	n := mustSingleNode(t, func(c *cluster.Config) { c.ExpiryLimit, c.Clock = 7, clk })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 30 {
		ttl := 2 * time.Second
		if i%10 == 0 {
			ttl = time.Hour // these stay
		}
		_, err := n.Apply(ctx, &fsm.Command{Type: fsm.TypeClaim, Key: fsm.RecordKey{Key: fmt.Sprint(i)},
			Owner: "o", Lease: int64(100 * time.Millisecond), TTL: int64(ttl)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := n.Machine().Len(); got != 30 {
		t.Fatalf("%d records stored, want 30", got)
	}
	clk.Advance(2 * time.Second) // past the short TTLs
	testutil.Eventually(t, 15*time.Second, "expired records deleted", func() error {
		if got := n.Machine().Len(); got != 3 {
			return fmt.Errorf("%d records left, want the 3 long-lived ones", got)
		}
		return nil
	})
}

// TestNodeStampsItsClock: the time a node stamps into its commands is its
// Config.Clock's, an offset clock's included (a fault build's
// --fault-clock-offset): a record's times follow it, not the machine's.
func TestNodeStampsItsClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := testclock.New(at)
	n := mustSingleNode(t, func(c *cluster.Config) { c.Clock = clock.Offset(clk, time.Hour) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	claim := func(key string) fsm.Result {
		t.Helper()
		res, err := n.Apply(ctx, &fsm.Command{Type: fsm.TypeClaim, Key: fsm.RecordKey{Key: key}, Owner: "o",
			Lease: int64(time.Minute), TTL: int64(time.Hour)})
		if err != nil || res.Outcome != fsm.OutcomeWon {
			t.Fatalf("claim %s: %v %+v", key, err, res)
		}
		return res
	}
	if got, want := time.Unix(0, claim("first").Record.CreatedAt), at.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("created at %v, want the offset clock's %v", got, want)
	}
	clk.Advance(time.Second)
	if got, want := time.Unix(0, claim("second").Record.LeaseExpiresAt), at.Add(time.Hour+time.Second+time.Minute); !got.Equal(want) {
		t.Fatalf("lease ends at %v, want %v", got, want)
	}
}
