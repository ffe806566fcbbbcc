package rpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

func checkLeadershipLost(t *testing.T, what string, err error) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("%s: %v, want Unavailable", what, err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == idempb.ReasonLeadershipLost {
			return
		}
	}
	t.Errorf("%s: %v, want reason %s", what, st.Details(), idempb.ReasonLeadershipLost)
}

// TestWaitEndsOnLeaderChange holds waits on the leader, moves leadership
// away, and checks that the waits sent to the leader itself end at once
// with a retryable LEADERSHIP_LOST, while a wait forwarded by a follower is
// carried over to the new leader and still sees the completion.
func TestWaitEndsOnLeaderChange(t *testing.T) {
	rpc.SkipInShort(t, "moves leadership around a 3-node cluster")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitLeader(30 * time.Second)
	var follower *testcluster.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			follower = nd
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := func(key string) *idempb.RecordId {
		return &idempb.RecordId{Tenant: "acme", Scope: "POST /v1/charges", Key: key}
	}
	holders := map[string]uint64{}
	for _, key := range []string{"claim", "wait", "forwarded"} {
		resp, err := leader.Client().Claim(ctx, &idempb.ClaimRequest{Id: id(key), Owner: "holder"})
		if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("claim %s = %v, %v; want WON", key, resp, err)
		}
		holders[key] = resp.GetToken()
	}

	minute := durationpb.New(time.Minute)
	claimed := testutil.Go(func() (*idempb.ClaimResponse, error) {
		return leader.Client().Claim(ctx, &idempb.ClaimRequest{Id: id("claim"), Owner: "waiter", Wait: minute})
	})
	waited := testutil.Go(func() (*idempb.WaitResponse, error) {
		return leader.Client().Wait(ctx, &idempb.WaitRequest{Id: id("wait"), Timeout: minute})
	})
	forwarded := testutil.Go(func() (*idempb.WaitResponse, error) {
		return follower.Client().Wait(ctx, &idempb.WaitRequest{Id: id("forwarded"), Timeout: minute})
	})
	machine := leader.Node().Machine()
	testutil.Eventually(t, 10*time.Second, "three waits held on the leader", func() bool { return machine.Waiting() == 3 })

	if _, err := leader.Admin().TransferLeadership(ctx, &idempb.TransferLeadershipRequest{}); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	a := testutil.Await(t, "waiting claim on the old leader", 20*time.Second, claimed)
	checkLeadershipLost(t, "waiting claim on the old leader", a.Err)
	b := testutil.Await(t, "wait on the old leader", 20*time.Second, waited)
	checkLeadershipLost(t, "wait on the old leader", b.Err)

	newLeader := c.WaitLeader(30 * time.Second)
	if newLeader == leader {
		t.Fatalf("leadership stayed on %s", leader.ID)
	}
	// The forwarded wait is held again on the new leader; complete the key
	// there once it is, and the follower's caller gets the completion.
	testutil.Eventually(t, 10*time.Second, "the forwarded wait held on the new leader", func() bool {
		return newLeader.Node().Machine().Waiting() >= 1
	})
	out, err := newLeader.Client().Complete(ctx, &idempb.CompleteRequest{Id: id("forwarded"), Token: holders["forwarded"],
		Response: &idempb.Response{Status: 201, Body: []byte("done")}})
	if err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("complete forwarded = %v, %v", out, err)
	}
	f := testutil.Await(t, "forwarded wait", 20*time.Second, forwarded)
	if f.Err != nil || f.V.GetOutcome() != idempb.Outcome_OUTCOME_COMPLETED || string(f.V.GetRecord().GetResponse().GetBody()) != "done" {
		t.Errorf("forwarded wait = %v, %v; want COMPLETED with the response", f.V, f.Err)
	}
}
