package rpc_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/internal/netfault"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// feedToken is tenant acme's bearer token in that test.
const feedToken = "acme-feed-token-000001"

// asAcme adds acme's token to ctx.
func asAcme(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+feedToken)
}

// abandonOn claims key as acme on the leader with a lease that lapses at
// once and returns the sequence of the event that reports it.
func abandonOn(t *testing.T, c *testcluster.Cluster, key string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(asAcme(context.Background()), 30*time.Second)
	defer cancel()
	leader := c.WaitLeader(30 * time.Second)
	won, err := leader.Client().Claim(ctx, &idempb.ClaimRequest{Id: &idempb.RecordId{Key: key}, Owner: "o",
		Fingerprint: []byte{1}, Lease: durationpb.New(100 * time.Millisecond)})
	if err != nil || won.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim %s on %s: %v %v", key, leader.ID, won, err)
	}
	var seq uint64
	testutil.Eventually(t, 20*time.Second, "the abandonment of "+key, func() bool {
		page, err := leader.Client().ListAbandoned(ctx, &idempb.ListAbandonedRequest{PageSize: 1000})
		for _, ev := range page.GetRecords() {
			if err == nil && ev.GetId().GetKey() == key {
				seq = ev.GetSeq()
				return true
			}
		}
		return false
	})
	return seq
}

// TestFeedCursorFromTheLeaderOnALaggingFollower: a cursor taken on the
// leader is legitimately ahead of a follower that lags (here: cut off). The
// follower must not refuse it as ahead of the cluster: while it cannot
// reach the leader, a ListAbandoned after the cursor waits instead (and
// runs out of time), and once the follower is back the list is answered by
// the leader, for the caller's tenant (the cluster runs with TLS and
// tokens: the leader sees the follower as a peer, not the caller), and a
// watch from the cursor streams the next event.
func TestFeedCursorFromTheLeaderOnALaggingFollower(t *testing.T) {
	rpc.SkipInShort(t, "a 3-node TLS cluster with a follower partitioned away")
	t.Parallel()
	if err := netfault.Available(); err != nil {
		t.Skipf("partition test skipped: %v", err)
	}
	addrs := testaddr.New(t)
	p, err := netfault.New(addrs.Chain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: testcluster.Tokens(t, map[string]string{feedToken: "acme"})})
	if err != nil {
		t.Fatal(err)
	}
	limits := rpc.DefaultLimits()
	limits.MinLease = 100 * time.Millisecond
	// Feed calls the follower's handlers began, counted once it is known.
	var followerIP atomic.Pointer[string]
	var lists, watches atomic.Int64
	onFollower := func(ctx context.Context, method string) {
		pr, ok := peer.FromContext(ctx)
		ip := followerIP.Load()
		if !ok || ip == nil || pr.LocalAddr == nil || !strings.HasPrefix(pr.LocalAddr.String(), *ip+":") {
			return
		}
		switch method {
		case idempb.Idempotency_ListAbandoned_FullMethodName:
			lists.Add(1)
		case idempb.Idempotency_WatchAbandoned_FullMethodName:
			watches.Add(1)
		}
	}
	c := testcluster.Start(t, 3, testcluster.Options{Addrs: addrs, Limits: &limits,
		Security: testcluster.NewSecurity(t),
		Unary: []grpc.UnaryServerInterceptor{auth.UnaryInterceptor(),
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				onFollower(ctx, info.FullMethod)
				return h(ctx, req)
			}},
		Stream: []grpc.StreamServerInterceptor{auth.StreamInterceptor(),
			func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				onFollower(ss.Context(), info.FullMethod)
				return h(srv, ss)
			}}})
	leader := c.WaitLeader(30 * time.Second)
	var follower *testcluster.Node
	var others []string
	for _, nd := range c.Nodes {
		if nd != leader {
			follower = nd
		}
	}
	for _, nd := range c.Nodes {
		if nd != follower {
			others = append(others, nd.IP)
		}
	}
	followerIP.Store(&follower.IP)
	abandonOn(t, c, "before")
	c.WaitConverged(20 * time.Second)

	if err := p.Isolate(follower.IP, others...); err != nil {
		t.Fatal(err)
	}
	listCursor := abandonOn(t, c, "cut-off-1")
	cursor := abandonOn(t, c, "cut-off-2") // the leader's cursor
	if seq := follower.Node().Machine().Meta().Feed.Seq; seq >= listCursor {
		t.Fatalf("the cut-off follower's feed ends at %d, not behind the leader's %d", seq, listCursor)
	}
	ctx, cancel := context.WithTimeout(asAcme(context.Background()), 60*time.Second)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = follower.Client().ListAbandoned(lctx, &idempb.ListAbandonedRequest{AfterSeq: cursor})
	lcancel()
	if code := status.Code(err); code != codes.DeadlineExceeded && code != codes.Unavailable {
		t.Fatalf("list after the leader's cursor on the cut-off follower: %v, want it to wait for the leader", err)
	}
	listed := testutil.Go(func() (*idempb.ListAbandonedResponse, error) {
		return follower.Client().ListAbandoned(ctx, &idempb.ListAbandonedRequest{AfterSeq: listCursor})
	})
	stream, err := follower.Client().WatchAbandoned(ctx, &idempb.WatchAbandonedRequest{AfterSeq: cursor})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the list and the watch on the follower", func() bool {
		return lists.Load() >= 2 && watches.Load() >= 1
	})
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	a := testutil.Await(t, "the list after the leader's cursor on the follower", 60*time.Second, listed)
	if got := a.V.GetRecords(); a.Err != nil || len(got) != 1 || got[0].GetId().GetKey() != "cut-off-2" ||
		got[0].GetId().GetTenant() != "acme" {
		t.Fatalf("list after %d on the follower once back: %v, %v; want acme's cut-off-2", listCursor, got, a.Err)
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
			info.GetReason() == idempb.ReasonFeedCursorAhead && info.GetMetadata()["last_seq"] == fmt.Sprint(last) {
			return
		}
	}
	t.Fatalf("%s: %v %v, want OutOfRange %s with last_seq %d", what, err, st.Details(), idempb.ReasonFeedCursorAhead, last)
}
