package rpc

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testclock"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestTombstonesOverTheAPI: with --tombstone-ttl, a late retry of a
// completed operation is EXPIRED (saying when it completed and expired),
// another request under the key MISMATCH, Get and Wait show the tombstone,
// and a holder's calls answer EXPIRED; an operation that expired PENDING
// is EXPIRED without a completion time; a released key leaves none.
func TestTombstonesOverTheAPI(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	limits.MinTTL, limits.MinLease, limits.TombstoneTTL = 100*time.Millisecond, 100*time.Millisecond, time.Hour
	clk := testclock.New(time.Now())
	_, conn := serveAPI(t, mustNodeOn(t, clk), limits)
	api := idempb.NewIdempotencyClient(conn)
	ctx := testCtx(t)
	claim := func(key, owner string, fp byte) *idempb.ClaimResponse {
		t.Helper()
		resp, err := api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("acme", key), Owner: owner, Fingerprint: []byte{fp},
			Lease: durationpb.New(150 * time.Millisecond), Ttl: durationpb.New(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	paid := claim("paid", "o1", 1)
	if out, err := api.Complete(ctx, &idempb.CompleteRequest{Id: tenantID("acme", "paid"), Token: paid.GetToken(),
		Response: &idempb.Response{Status: 201}}); err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("complete: %v %v", out, err)
	}
	lost := claim("lost", "o1", 1)
	released := claim("released", "o1", 1)
	if _, err := api.Release(ctx, &idempb.ReleaseRequest{Id: tenantID("acme", "released"), Token: released.GetToken()}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1200 * time.Millisecond) // past every TTL

	late := claim("paid", "o2", 1)
	if late.GetOutcome() != idempb.Outcome_OUTCOME_EXPIRED || late.GetCompletedAt() == nil || late.GetExpiresAt() == nil || late.GetResponse() != nil {
		t.Fatalf("late retry of a completed operation: %v", late)
	}
	if other := claim("paid", "o3", 2); other.GetOutcome() != idempb.Outcome_OUTCOME_MISMATCH || other.GetExpiresAt() != nil {
		t.Fatalf("another request under the key: %v", other)
	}
	unknown := claim("lost", "o2", 1)
	if unknown.GetOutcome() != idempb.Outcome_OUTCOME_EXPIRED || unknown.GetCompletedAt() != nil {
		t.Fatalf("late retry of an operation that expired pending: %v", unknown)
	}
	if again := claim("released", "o2", 1); again.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("a released key: %v, want it free", again)
	}
	got, err := api.Get(ctx, &idempb.GetRequest{Id: tenantID("acme", "paid")})
	if err != nil || got.GetOutcome() != idempb.Outcome_OUTCOME_EXPIRED || got.GetRecord().GetState() != idempb.State_STATE_EXPIRED ||
		got.GetRecord().GetResponse() != nil {
		t.Fatalf("Get of a tombstone: %v %v", got, err)
	}
	waited, err := api.Wait(ctx, &idempb.WaitRequest{Id: tenantID("acme", "lost"), Timeout: durationpb.New(5 * time.Second)})
	if err != nil || waited.GetOutcome() != idempb.Outcome_OUTCOME_EXPIRED {
		t.Fatalf("Wait on a tombstone: %v %v", waited, err)
	}
	done, err := api.Complete(ctx, &idempb.CompleteRequest{Id: tenantID("acme", "lost"), Token: lost.GetToken(), Response: &idempb.Response{Status: 200}})
	if err != nil || done.GetOutcome() != idempb.Outcome_OUTCOME_EXPIRED {
		t.Fatalf("the holder's late completion: %v %v", done, err)
	}
}

// TestUpgradingIsAFailedPrecondition: a command a voter's release cannot
// apply reaches the client as FailedPrecondition, reason
// CLUSTER_UPGRADING, which says to retry after the upgrade.
func TestUpgradingIsAFailedPrecondition(t *testing.T) {
	err := toStatus(fmt.Errorf("apply: %w", cluster.ErrUpgrading), slog.New(slog.DiscardHandler))
	st := status.Convert(err)
	var reason string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	if st.Code() != codes.FailedPrecondition || reason != idempb.ReasonClusterUpgrading {
		t.Fatalf("got %v (reason %q), want FailedPrecondition %s", err, reason, idempb.ReasonClusterUpgrading)
	}
}
