package rpc

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// withLimits serves a second API with other limits over the same node, and
// returns the server (to count its waits) and a client of it.
func (c *testCluster) withLimits(t *testing.T, limits Limits) (*Server, idempb.IdempotencyClient) {
	t.Helper()
	s, conn := serveAPI(t, c.node, limits)
	return s, idempb.NewIdempotencyClient(conn)
}

// tenantID addresses key under tenant.
func tenantID(tenant, key string) *idempb.RecordId {
	return &idempb.RecordId{Tenant: tenant, Scope: "POST /v1/charges", Key: key}
}

// checkTooManyWaits requires ResourceExhausted with reason TOO_MANY_WAITS
// for scope.
func checkTooManyWaits(t *testing.T, what string, err error, scope string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%s: %v, want ResourceExhausted", what, err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != idempb.ReasonTooManyWaits || info.GetMetadata()["scope"] != scope {
				t.Errorf("%s: ErrorInfo %v, want reason %s scope %s", what, info, idempb.ReasonTooManyWaits, scope)
			}
			return
		}
	}
	t.Errorf("%s: no ErrorInfo in %v", what, st.Details())
}

// TestWaitCaps fills the per-tenant cap, then the per-node cap, and checks
// that calls beyond them are refused while calls that need not block, and
// calls after a slot came back, are served.
func TestWaitCaps(t *testing.T) {
	t.Parallel()
	c := mustCluster(t)
	limits := DefaultLimits()
	limits.MaxWaitsPerNode, limits.MaxWaitsPerTenant = 3, 2
	s, api := c.withLimits(t, limits)
	ctx := testCtx(t)

	holders := map[string]*idempb.ClaimResponse{}
	for _, id := range []*idempb.RecordId{tenantID("acme", "k1"), tenantID("acme", "k2"), tenantID("acme", "k3"), tenantID("globex", "k1"), tenantID("globex", "k2")} {
		resp, err := api.Claim(ctx, &idempb.ClaimRequest{Id: id, Owner: "holder"})
		if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("claim %v = %v, %v; want WON", id, resp, err)
		}
		holders[id.GetTenant()+"/"+id.GetKey()] = resp
	}
	held := func(tenant string, n int) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, "held waits", func() bool { _, got := s.waits.active(tenant); return got == n })
	}

	// Two acme waits fill the tenant's cap: one waiting claim, one Wait.
	claimed := async(func() (*idempb.ClaimResponse, error) {
		return api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("acme", "k1"), Owner: "waiter", Wait: dur(time.Minute)})
	})
	waited := async(func() (*idempb.WaitResponse, error) {
		return api.Wait(ctx, &idempb.WaitRequest{Id: tenantID("acme", "k2"), Timeout: dur(time.Minute)})
	})
	held("acme", 2)
	_, err := api.Wait(ctx, &idempb.WaitRequest{Id: tenantID("acme", "k3"), Timeout: dur(time.Minute)})
	checkTooManyWaits(t, "third acme wait", err, "tenant")
	_, err = api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("acme", "k3"), Owner: "waiter", Wait: dur(time.Minute)})
	checkTooManyWaits(t, "third acme waiting claim", err, "tenant")

	// A globex wait takes the node's third slot; the fourth is refused.
	globex := async(func() (*idempb.WaitResponse, error) {
		return api.Wait(ctx, &idempb.WaitRequest{Id: tenantID("globex", "k1"), Timeout: dur(time.Minute)})
	})
	held("globex", 1)
	_, err = api.Wait(ctx, &idempb.WaitRequest{Id: tenantID("globex", "k2"), Timeout: dur(time.Minute)})
	checkTooManyWaits(t, "fourth wait on the node", err, "node")

	// Calls that need not block take no slot.
	if resp, err := api.Wait(ctx, &idempb.WaitRequest{Id: tenantID("acme", "absent")}); err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_NOT_FOUND {
		t.Errorf("wait on an absent key at the cap = %v, %v; want NOT_FOUND", resp, err)
	}
	if resp, err := api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("acme", "free"), Owner: "o", Wait: dur(time.Minute)}); err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Errorf("waiting claim of a free key at the cap = %v, %v; want WON", resp, err)
	}

	// Completing k1 ends the waiting claim, and its slot serves a new wait.
	if out, err := api.Complete(ctx, &idempb.CompleteRequest{Id: tenantID("acme", "k1"), Token: holders["acme/k1"].GetToken(), Response: storedResponse()}); err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("complete acme/k1 = %v, %v", out, err)
	}
	outcome(t, "waiting claim after completion", receive(t, claimed).GetOutcome(), idempb.Outcome_OUTCOME_COMPLETED)
	held("acme", 1)
	again := async(func() (*idempb.WaitResponse, error) {
		return api.Wait(ctx, &idempb.WaitRequest{Id: tenantID("acme", "k3"), Timeout: dur(time.Minute)})
	})
	held("acme", 2)

	for _, k := range []string{"acme/k2", "acme/k3", "globex/k1"} {
		tenant, key, _ := strings.Cut(k, "/")
		if out, err := api.Release(ctx, &idempb.ReleaseRequest{Id: tenantID(tenant, key), Token: holders[k].GetToken()}); err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_OK {
			t.Fatalf("release %s = %v, %v", k, out, err)
		}
	}
	for _, ch := range []<-chan asyncResult[*idempb.WaitResponse]{waited, again, globex} {
		outcome(t, "wait through release", receive(t, ch).GetOutcome(), idempb.Outcome_OUTCOME_NOT_FOUND)
	}
	if total, _ := s.waits.active(""); total != 0 {
		t.Errorf("%d waits still counted after every waiter returned", total)
	}
}
