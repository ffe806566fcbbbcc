package rpc

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestTenantIsolation: globex stores a completion and holds a claim; acme,
// authenticated by its certificate, sends every call with the very same
// (scope, key) and globex's tokens. Each lands in acme's own namespace:
// nothing of globex's (body, fingerprint, lease, token) comes back, and
// globex's records are exactly as they were.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := mustAuthServer(t, mustNode(t), DefaultLimits())
	ctx := testCtx(t)
	globex := s.withToken(t, tokenGlobex)
	acme := s.withCert(t, s.ca.tenantCert(t, "acme"))

	secretFP := []byte("globex-fingerprint-0123456789")
	secretBody := []byte(`{"card":"4242-globex-secret"}`)
	won, err := globex.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("done"), Fingerprint: secretFP, Owner: "g1"})
	if err != nil || won.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("globex claims: %v, %v", won, err)
	}
	doneToken := won.GetToken()
	if _, err := globex.api.Complete(ctx, &idempb.CompleteRequest{Id: mine("done"), Token: doneToken,
		Response: &idempb.Response{Status: 201, Headers: []*idempb.Header{{Name: "X-Globex", Value: "secret"}}, Body: secretBody}}); err != nil {
		t.Fatalf("globex completes: %v", err)
	}
	held, err := globex.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("held"), Fingerprint: secretFP, Owner: "g2", Lease: dur(time.Hour)})
	if err != nil || held.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("globex holds: %v, %v", held, err)
	}
	heldToken := held.GetToken()
	before := snapshotOf(t, globex)

	// acme's view of the same keys, and what its calls return.
	var seen []proto.Message
	keep := func(m proto.Message, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("acme's call: %v", err)
		}
		seen = append(seen, m)
	}
	for _, key := range []string{"done", "held"} {
		got, err := acme.api.Get(ctx, &idempb.GetRequest{Id: mine(key)})
		keep(got, err)
		if got.GetOutcome() != idempb.Outcome_OUTCOME_NOT_FOUND {
			t.Fatalf("acme gets %s: %v, want NOT_FOUND", key, got)
		}
		waited, err := acme.api.Wait(ctx, &idempb.WaitRequest{Id: mine(key), Timeout: dur(100 * time.Millisecond)})
		keep(waited, err)
		if waited.GetOutcome() != idempb.Outcome_OUTCOME_NOT_FOUND {
			t.Fatalf("acme waits on %s: %v, want NOT_FOUND", key, waited)
		}
	}
	for _, tok := range []uint64{doneToken, heldToken} {
		for _, key := range []string{"done", "held"} {
			c, err := acme.api.Complete(ctx, &idempb.CompleteRequest{Id: mine(key), Token: tok,
				Response: &idempb.Response{Status: 200, Body: []byte("acme overwrite")}})
			keep(c, err)
			e, err := acme.api.Extend(ctx, &idempb.ExtendRequest{Id: mine(key), Token: tok, Lease: dur(time.Hour)})
			keep(e, err)
			if c.GetOutcome() != idempb.Outcome_OUTCOME_NOT_FOUND || e.GetOutcome() != idempb.Outcome_OUTCOME_NOT_FOUND {
				t.Fatalf("acme completes/extends %s with globex's token: %v / %v, want NOT_FOUND", key, c, e)
			}
			r, err := acme.api.Release(ctx, &idempb.ReleaseRequest{Id: mine(key), Token: tok})
			keep(r, err) // OK: releasing an absent key is idempotent; it is acme's absent key
		}
	}
	// Claiming the same key with another request wins in acme's namespace:
	// no MISMATCH (which would reveal that the key is taken), no replay.
	claimed, err := acme.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("done"), Fingerprint: []byte("acme-fp"), Owner: "a1"})
	keep(claimed, err)
	if claimed.GetOutcome() != idempb.Outcome_OUTCOME_WON || claimed.GetResponse() != nil {
		t.Fatalf("acme claims done: %v, want WON without a response", claimed)
	}
	// Even with globex's fingerprint: a new record of acme's, not a replay.
	same, err := acme.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("held"), Fingerprint: secretFP, Owner: "a2"})
	keep(same, err)
	if same.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("acme claims held with globex's fingerprint: %v, want WON", same)
	}

	for _, m := range seen {
		b, _ := proto.Marshal(m)
		for name, secret := range map[string][]byte{"body": secretBody, "header": []byte("X-Globex")} {
			if bytes.Contains(b, secret) {
				t.Fatalf("acme saw globex's %s in %v", name, m)
			}
		}
		if r, ok := m.(*idempb.ClaimResponse); ok && (r.GetToken() == doneToken || r.GetToken() == heldToken) {
			t.Fatalf("acme holds globex's token: %v", r)
		}
		if r, ok := m.(interface{ GetRecord() *idempb.Record }); ok && r.GetRecord() != nil {
			t.Fatalf("acme saw a record: %v", r.GetRecord())
		}
	}
	for i, after := range snapshotOf(t, globex) {
		if !proto.Equal(before[i], after) {
			t.Fatalf("globex's record changed:\n%v\n->\n%v", before[i], after)
		}
	}
}

// snapshotOf returns globex's two records as globex reads them.
func snapshotOf(t *testing.T, globex *caller) []*idempb.Record {
	t.Helper()
	var out []*idempb.Record
	for _, key := range []string{"done", "held"} {
		got, err := globex.api.Get(testCtx(t), &idempb.GetRequest{Id: mine(key)})
		if err != nil || got.GetOutcome() != idempb.Outcome_OUTCOME_OK {
			t.Fatalf("globex gets %s: %v, %v", key, got, err)
		}
		out = append(out, got.GetRecord())
	}
	return out
}
