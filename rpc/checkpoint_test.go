package rpc

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/internal/testclock"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestCheckpointOverTheAPI: a holder records a recovery point, a retry is
// OK and other data for the same point a MISMATCH; a stale token is
// FENCED; the holder that takes the record over after the lease gets the
// point back with WON, and Get shows it; a completion drops it.
func TestCheckpointOverTheAPI(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	limits.MinLease = 100 * time.Millisecond
	clk := testclock.New(time.Now())
	_, conn := serveAPI(t, mustNodeOn(t, clk), limits)
	api := idempb.NewIdempotencyClient(conn)
	ctx := testCtx(t)
	id := tenantID("acme", "ride-1")
	claim := func(owner string) *idempb.ClaimResponse {
		t.Helper()
		resp, err := api.Claim(ctx, &idempb.ClaimRequest{Id: id, Owner: owner, Fingerprint: []byte{1},
			Lease: durationpb.New(200 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	checkpoint := func(token uint64, point, data string) idempb.Outcome {
		t.Helper()
		resp, err := api.Checkpoint(ctx, &idempb.CheckpointRequest{Id: id, Token: token, Point: point, Data: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOutcome()
	}
	first := claim("driver-1")
	if first.GetRecoveryPoint() != nil {
		t.Fatalf("a first claim resumes from %v", first.GetRecoveryPoint())
	}
	for _, step := range []struct {
		token       uint64
		point, data string
		want        idempb.Outcome
	}{
		{first.GetToken(), "charged", "ch_1", idempb.Outcome_OUTCOME_OK},
		{first.GetToken(), "charged", "ch_1", idempb.Outcome_OUTCOME_OK},
		{first.GetToken(), "charged", "ch_2", idempb.Outcome_OUTCOME_MISMATCH},
		{first.GetToken() + 1, "charged", "ch_1", idempb.Outcome_OUTCOME_FENCED},
	} {
		if got := checkpoint(step.token, step.point, step.data); got != step.want {
			t.Fatalf("checkpoint %s=%s by %d: %v, want %v", step.point, step.data, step.token, got, step.want)
		}
	}

	clk.Advance(250 * time.Millisecond) // the holder's lease lapses
	taken := claim("driver-2")
	rp := taken.GetRecoveryPoint()
	if taken.GetOutcome() != idempb.Outcome_OUTCOME_WON || taken.GetAttempt() != 2 || rp.GetName() != "charged" || !bytes.Equal(rp.GetData(), []byte("ch_1")) {
		t.Fatalf("takeover: %v", taken)
	}
	if got := checkpoint(first.GetToken(), "receipt-sent", ""); got != idempb.Outcome_OUTCOME_FENCED {
		t.Fatalf("the old holder's checkpoint after the takeover: %v", got)
	}
	got, err := api.Get(ctx, &idempb.GetRequest{Id: id})
	if err != nil || got.GetRecord().GetRecoveryPoint().GetName() != "charged" {
		t.Fatalf("Get: %v %v", got, err)
	}
	if _, err := api.Complete(ctx, &idempb.CompleteRequest{Id: id, Token: taken.GetToken(), Response: &idempb.Response{Status: 201}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := api.Get(ctx, &idempb.GetRequest{Id: id}); got.GetRecord().GetRecoveryPoint() != nil {
		t.Fatalf("completed record still shows %v", got.GetRecord().GetRecoveryPoint())
	}
}

// TestCheckpointRefusesBadInput: each limit is InvalidArgument naming the
// field, and nothing is stored.
func TestCheckpointRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, conn := serveAPI(t, mustNode(t), DefaultLimits())
	api := idempb.NewIdempotencyClient(conn)
	ctx := testCtx(t)
	id := tenantID("acme", "k")
	won, err := api.Claim(ctx, &idempb.ClaimRequest{Id: id, Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req   *idempb.CheckpointRequest
		field string
	}{
		{&idempb.CheckpointRequest{Id: id, Token: won.GetToken()}, "point"},
		{&idempb.CheckpointRequest{Id: id, Token: won.GetToken(), Point: "two words"}, "point"},
		{&idempb.CheckpointRequest{Id: id, Token: won.GetToken(), Point: strings.Repeat("p", 129)}, "point"},
		{&idempb.CheckpointRequest{Id: id, Token: won.GetToken(), Point: "p", Data: make([]byte, 64<<10+1)}, "data"},
		{&idempb.CheckpointRequest{Id: id, Point: "p"}, "token"},
	} {
		_, err := api.Checkpoint(ctx, tc.req)
		checkInvalid(t, err, tc.field)
	}
	got, _ := api.Get(ctx, &idempb.GetRequest{Id: id})
	if got.GetRecord().GetRecoveryPoint() != nil {
		t.Fatalf("a refused checkpoint stored %v", got.GetRecord().GetRecoveryPoint())
	}
}
