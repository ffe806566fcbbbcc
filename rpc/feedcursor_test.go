package rpc_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/internal/netfault"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// subnetFeedFollower is TestFeedCursorFromTheLeaderOnALaggingFollower's.
const subnetFeedFollower = 187

// abandonOn claims key through nd with a lease that lapses at once and
// returns when the leader's feed has reported the abandonment, with the
// leader's last sequence then.
func abandonOn(t *testing.T, c *testcluster.Cluster, key string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := c.WaitLeader(30 * time.Second)
	won, err := leader.Client().Claim(ctx, &idempb.ClaimRequest{Id: &idempb.RecordId{Key: key}, Owner: "o",
		Fingerprint: []byte{1}, Lease: durationpb.New(100 * time.Millisecond)})
	if err != nil || won.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim %s on %s: %v %v", key, leader.ID, won, err)
	}
	var last uint64
	testutil.WaitFor(t, 20*time.Second, "the abandonment of "+key, func() bool {
		page, err := leader.Client().ListAbandoned(ctx, &idempb.ListAbandonedRequest{PageSize: 1000})
		for _, ev := range page.GetRecords() {
			if err == nil && ev.GetId().GetKey() == key {
				last = ev.GetSeq()
				return true
			}
		}
		return false
	})
	return last
}

// TestFeedCursorFromTheLeaderOnALaggingFollower: a cursor taken on the
// leader is legitimately ahead of a follower that lags (here: cut off). The
// follower must not refuse it as ahead of the cluster: while it cannot
// reach the leader, a ListAbandoned after the cursor runs out of time
// instead of being refused, and a watch from the cursor waits, then streams
// the next event once the follower is back.
func TestFeedCursorFromTheLeaderOnALaggingFollower(t *testing.T) {
	t.Parallel()
	if err := netfault.Available(); err != nil {
		t.Skipf("partition test skipped: %v", err)
	}
	p, err := netfault.New(fmt.Sprintf("F%d", subnetFeedFollower))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	limits := rpc.DefaultLimits()
	limits.MinLease = 100 * time.Millisecond
	var watches atomic.Int64 // WatchAbandoned calls the follower's handler began
	var follower *testcluster.Node
	c := testcluster.Start(t, 3, testcluster.Options{Subnet: subnetFeedFollower, Limits: &limits,
		Stream: []grpc.StreamServerInterceptor{func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if info.FullMethod == idempb.Idempotency_WatchAbandoned_FullMethodName {
				watches.Add(1)
			}
			return h(srv, ss)
		}}})
	leader := c.WaitLeader(30 * time.Second)
	for _, nd := range c.Nodes {
		if nd != leader {
			follower = nd
		}
	}
	abandonOn(t, c, "before")
	c.WaitConverged(20 * time.Second)

	var others []string
	for _, nd := range c.Nodes {
		if nd != follower {
			others = append(others, nd.IP)
		}
	}
	if err := p.Isolate(follower.IP, others...); err != nil {
		t.Fatal(err)
	}
	cursor := abandonOn(t, c, "cut-off") // the leader's cursor
	if seq := follower.Node().Machine().Meta().Feed.Seq; seq >= cursor {
		t.Fatalf("the cut-off follower's feed ends at %d, not behind the leader's %d", seq, cursor)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = follower.Client().ListAbandoned(lctx, &idempb.ListAbandonedRequest{AfterSeq: cursor})
	lcancel()
	if code := status.Code(err); code != codes.DeadlineExceeded && code != codes.Unavailable {
		t.Fatalf("list after the leader's cursor on the cut-off follower: %v, want it to wait for the leader", err)
	}

	stream, err := follower.Client().WatchAbandoned(ctx, &idempb.WatchAbandonedRequest{AfterSeq: cursor})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the watch on the follower", func() bool { return watches.Load() > 0 })
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	abandonOn(t, c, "after")
	for {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("the watch from the leader's cursor %d on the follower: %v", cursor, err)
		}
		if evs := msg.GetEvents(); len(evs) > 0 {
			if evs[0].GetSeq() != cursor+1 || evs[0].GetId().GetKey() != "after" {
				t.Fatalf("the follower's watch after %d starts with %v", cursor, evs[0])
			}
			break
		}
	}
	if _, err := follower.Client().ListAbandoned(ctx, &idempb.ListAbandonedRequest{AfterSeq: cursor}); err != nil {
		t.Fatalf("list after the leader's cursor on the follower: %v", err)
	}
	// Past the cluster's feed, the leader refuses for the follower.
	_, err = follower.Client().ListAbandoned(ctx, &idempb.ListAbandonedRequest{AfterSeq: cursor + 100})
	checkAheadOf(t, "list past the cluster's feed on the follower", err, cursor+1)
	ahead, err := follower.Client().WatchAbandoned(ctx, &idempb.WatchAbandonedRequest{AfterSeq: cursor + 100})
	if err == nil {
		_, err = ahead.Recv()
	}
	checkAheadOf(t, "watch past the cluster's feed on the follower", err, cursor+1)
}

// checkAheadOf requires OutOfRange FEED_CURSOR_AHEAD with last_seq last.
func checkAheadOf(t *testing.T, what string, err error, last uint64) {
	t.Helper()
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && st.Code() == codes.OutOfRange &&
			info.GetReason() == rpc.ReasonFeedCursorAhead && info.GetMetadata()["last_seq"] == fmt.Sprint(last) {
			return
		}
	}
	t.Fatalf("%s: %v %v, want OutOfRange %s with last_seq %d", what, err, st.Details(), rpc.ReasonFeedCursorAhead, last)
}
