package rpc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/internal/testclock"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// leaderWithStream serves a real single node's API (its own leader) on
// loopback and opens a forwarding link to it, as a follower would.
func leaderWithStream(t *testing.T) (*Server, *grpc.Server, *link) {
	t.Helper()
	return leaderWithStreamOn(t, nil)
}

// leaderWithStreamOn is leaderWithStream with the node on clk (nil: the
// real clock).
func leaderWithStreamOn(t *testing.T, clk clock.Clock) (*Server, *grpc.Server, *link) {
	t.Helper()
	return leaderWithLimits(t, mustNodeOn(t, clk), DefaultLimits())
}

// waitingClaim is a claim of a key someone else holds, waiting up to wait.
func waitingClaim(key, owner string, wait time.Duration) *idempb.ForwardCall {
	return &idempb.ForwardCall{Request: &idempb.ForwardCall_Claim{Claim: &idempb.ClaimRequest{
		Id: &idempb.RecordId{Tenant: "t", Key: key}, Fingerprint: []byte("fp"), Owner: owner,
		Lease: durationpb.New(time.Minute), Wait: durationpb.New(wait)}}}
}

// TestShutdownEndsStreamsWithCallsRunning: a leader shutting down while a
// stream has hundreds of calls waiting stops at once, instead of waiting
// for them (GracefulStop used to hang on such a stream).
func TestShutdownEndsStreamsWithCallsRunning(t *testing.T) {
	s, g, l := leaderWithStream(t)
	ctx := testCtx(t)
	if _, err := s.Claim(ctx, &idempb.ClaimRequest{Id: &idempb.RecordId{Tenant: "t", Key: "held"},
		Fingerprint: []byte("fp"), Owner: "holder", Lease: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		go func() { _, _ = l.call(ctx, waitingClaim("held", fmt.Sprintf("w%d", i), time.Minute)) }()
	}
	testutil.Eventually(t, 10*time.Second, "400 waiting claims on the leader", func() bool {
		total, _ := s.waits.active("")
		return total >= 400
	})
	s.Shutdown()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("GracefulStop still waiting 5 s after Shutdown: the forwarding stream did not end")
	}
}

// TestForwardedWaitWithoutDeadlineLastsAsAsked: a forwarded claim whose
// client set no deadline waits as long as its wait, like a unary call; it
// is not cut at some default on the leader. Every timeout rpc puts on a
// call runs on its clock (TestCallTimeoutsRunOnTheServersClock), so
// advancing a fake clock past the 10 s cap a forwarded call once had would
// end the wait.
func TestForwardedWaitWithoutDeadlineLastsAsAsked(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Now())
	s, _, l := leaderWithStreamOn(t, clk)
	ctx := testCtx(t)
	held, err := s.Claim(ctx, &idempb.ClaimRequest{Id: &idempb.RecordId{Tenant: "t", Key: "slow"},
		Fingerprint: []byte("fp"), Owner: "holder", Lease: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	armed := clk.Waiting()
	answer := make(chan *idempb.ForwardReply, 1)
	go func() {
		r, err := l.call(context.Background(), waitingClaim("slow", "waiter", 20*time.Second))
		if err != nil {
			t.Error(err)
		}
		answer <- r
	}()
	// The wait's own timer and the holder's lease timer are armed: only
	// then does advancing the clock reach them.
	testutil.Eventually(t, 10*time.Second, "the forwarded claim waiting on the leader", func() bool {
		total, _ := s.waits.active("")
		return total >= 1 && clk.Waiting() >= armed+2
	})
	clk.Advance(11 * time.Second) // past any 10 s default a forwarded call once had
	select {
	case r := <-answer:
		t.Fatalf("a 20 s wait answered %v 11 s in", r)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := s.Complete(ctx, &idempb.CompleteRequest{Id: &idempb.RecordId{Tenant: "t", Key: "slow"},
		Token: held.GetToken(), Response: &idempb.Response{Status: 201, Body: []byte("done")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-answer:
		if got := r.GetClaim().GetOutcome(); got != idempb.Outcome_OUTCOME_COMPLETED {
			t.Fatalf("waiting claim answered %v, want COMPLETED once the holder completed", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting claim did not answer after the completion")
	}
}
