package rpc

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// storedResponse has ordered, repeated header names and a body that is not
// UTF-8, so a replay that reorders, merges or re-encodes anything shows.
func storedResponse() *idempb.Response {
	return &idempb.Response{Status: 201,
		Headers: []*idempb.Header{{Name: "Set-Cookie", Value: "a=1"}, {Name: "Content-Type", Value: "application/octet-stream"},
			{Name: "Set-Cookie", Value: "b=2"}, {Name: "X-Empty", Value: ""}},
		Body: []byte{0xff, 0xfe, 0x00, 0x80, 'o', 'k', '\n', 0xc3}}
}

func outcome(t *testing.T, what string, got, want idempb.Outcome) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: outcome %v, want %v", what, got, want)
	}
}

// TestClaimCompleteFlow walks one key through the outcome table of DESIGN.md
// §2 over real gRPC.
func TestClaimCompleteFlow(t *testing.T) {
	t.Parallel()
	c := mustCluster(t)
	ctx := testCtx(t)
	fp := []byte("fingerprint-of-request-1")
	claim := func(owner string, fp []byte) *idempb.ClaimResponse {
		return c.claim(t, &idempb.ClaimRequest{Id: rid("k1"), Fingerprint: fp, Owner: owner})
	}

	won := claim("owner-a", fp)
	outcome(t, "first claim", won.GetOutcome(), idempb.Outcome_OUTCOME_WON)
	if won.GetToken() == 0 || won.GetAttempt() != 1 || won.GetLeaseExpiresAt() == nil || won.GetExpiresAt() == nil || won.GetResponse() != nil {
		t.Fatalf("first claim = %v, want a token, attempt 1, both times and no response", won)
	}
	lease, expires := won.GetLeaseExpiresAt().AsTime(), won.GetExpiresAt().AsTime()
	if d := lease.Sub(expires.Add(-24 * time.Hour)); d != 30*time.Second {
		t.Errorf("default lease and ttl: lease ends %s after creation, want 30s", d)
	}

	retry := claim("owner-a", fp)
	if !proto.Equal(retry, won) {
		t.Errorf("retried claim by the same owner = %v, want %v", retry, won)
	}

	busy := claim("owner-b", fp)
	outcome(t, "claim by another owner", busy.GetOutcome(), idempb.Outcome_OUTCOME_IN_PROGRESS)
	if busy.GetToken() != 0 || busy.GetResponse() != nil || !proto.Equal(busy.GetLeaseExpiresAt(), won.GetLeaseExpiresAt()) {
		t.Errorf("in-progress claim = %v, want the lease end and no token", busy)
	}

	other := claim("owner-a", []byte("another request"))
	if want := (&idempb.ClaimResponse{Outcome: idempb.Outcome_OUTCOME_MISMATCH}); !proto.Equal(other, want) {
		t.Errorf("claim with another fingerprint = %v, want bare MISMATCH", other)
	}

	complete := func(token uint64, r *idempb.Response) idempb.Outcome {
		out, err := c.api.Complete(ctx, &idempb.CompleteRequest{Id: rid("k1"), Token: token, Response: r})
		if err != nil {
			t.Fatalf("complete: %v", err)
		}
		return out.GetOutcome()
	}
	outcome(t, "complete by the holder", complete(won.GetToken(), storedResponse()), idempb.Outcome_OUTCOME_OK)
	outcome(t, "retried complete", complete(won.GetToken(), storedResponse()), idempb.Outcome_OUTCOME_OK)
	changed := storedResponse()
	changed.Body = []byte("other bytes")
	outcome(t, "second complete with other bytes", complete(won.GetToken(), changed), idempb.Outcome_OUTCOME_MISMATCH)
	outcome(t, "complete with another token", complete(won.GetToken()+1, storedResponse()), idempb.Outcome_OUTCOME_FENCED)

	replay := claim("owner-c", fp)
	outcome(t, "claim after completion", replay.GetOutcome(), idempb.Outcome_OUTCOME_COMPLETED)
	if !proto.Equal(replay.GetResponse(), storedResponse()) {
		t.Errorf("replayed response = %v, want %v", replay.GetResponse(), storedResponse())
	}
	if replay.GetToken() != won.GetToken() || replay.GetAttempt() != 1 || replay.GetLeaseExpiresAt() != nil {
		t.Errorf("replay = %v, want the winner's token and attempt and no lease", replay)
	}
	mismatch := claim("owner-c", []byte("another request"))
	if want := (&idempb.ClaimResponse{Outcome: idempb.Outcome_OUTCOME_MISMATCH}); !proto.Equal(mismatch, want) {
		t.Errorf("claim of a completed key with another fingerprint = %v, want bare MISMATCH", mismatch)
	}

	for _, cons := range []idempb.Consistency{idempb.Consistency_CONSISTENCY_LINEARIZABLE, idempb.Consistency_CONSISTENCY_STALE} {
		got := c.get(t, "k1", cons)
		outcome(t, "get "+cons.String(), got.GetOutcome(), idempb.Outcome_OUTCOME_OK)
		r := got.GetRecord()
		if r.GetState() != idempb.State_STATE_COMPLETED || r.GetToken() != won.GetToken() || r.GetCompletedAt() == nil ||
			!proto.Equal(r.GetId(), rid("k1")) || string(r.GetFingerprint()) != string(fp) || !proto.Equal(r.GetResponse(), storedResponse()) {
			t.Errorf("get %v = %v", cons, r)
		}
	}
	outcome(t, "get of an absent key", c.get(t, "absent", idempb.Consistency_CONSISTENCY_LINEARIZABLE).GetOutcome(), idempb.Outcome_OUTCOME_NOT_FOUND)

	// The same key under another scope or tenant is another record.
	elsewhere := &idempb.ClaimRequest{Id: &idempb.RecordId{Tenant: "acme", Scope: "POST /v1/refunds", Key: "k1"}, Fingerprint: fp, Owner: "owner-d"}
	outcome(t, "same key, other scope", c.claim(t, elsewhere).GetOutcome(), idempb.Outcome_OUTCOME_WON)
	elsewhere.Id = &idempb.RecordId{Tenant: "globex", Scope: "POST /v1/charges", Key: "k1"}
	outcome(t, "same key, other tenant", c.claim(t, elsewhere).GetOutcome(), idempb.Outcome_OUTCOME_WON)
	if n := c.status(t).GetRecords(); n != 3 {
		t.Errorf("status counts %d records, want 3", n)
	}
}

// TestReleaseAndExtend covers the holder's other two calls and the fencing
// of both.
func TestReleaseAndExtend(t *testing.T) {
	t.Parallel()
	c := mustCluster(t)
	ctx := testCtx(t)
	release := func(key string, token uint64) idempb.Outcome {
		out, err := c.api.Release(ctx, &idempb.ReleaseRequest{Id: rid(key), Token: token})
		if err != nil {
			t.Fatalf("release %s: %v", key, err)
		}
		return out.GetOutcome()
	}
	extend := func(key string, token uint64, lease time.Duration) *idempb.ExtendResponse {
		out, err := c.api.Extend(ctx, &idempb.ExtendRequest{Id: rid(key), Token: token, Lease: dur(lease)})
		if err != nil {
			t.Fatalf("extend %s: %v", key, err)
		}
		return out
	}

	outcome(t, "release of an absent key", release("absent", 1<<16), idempb.Outcome_OUTCOME_OK)
	outcome(t, "extend of an absent key", extend("absent", 1<<16, time.Minute).GetOutcome(), idempb.Outcome_OUTCOME_NOT_FOUND)
	done, err := c.api.Complete(ctx, &idempb.CompleteRequest{Id: rid("absent"), Token: 1 << 16})
	if err != nil {
		t.Fatalf("complete absent: %v", err)
	}
	outcome(t, "complete of an absent key", done.GetOutcome(), idempb.Outcome_OUTCOME_NOT_FOUND)

	first := c.mustWin(t, "k2", "owner-a", nil)
	ext := extend("k2", first.GetToken(), time.Hour)
	outcome(t, "extend by the holder", ext.GetOutcome(), idempb.Outcome_OUTCOME_OK)
	if !ext.GetLeaseExpiresAt().AsTime().After(first.GetLeaseExpiresAt().AsTime().Add(59 * time.Minute)) {
		t.Errorf("extended lease ends %v, want about an hour after %v", ext.GetLeaseExpiresAt().AsTime(), first.GetLeaseExpiresAt().AsTime())
	}
	got := c.get(t, "k2", idempb.Consistency_CONSISTENCY_LINEARIZABLE).GetRecord()
	if !proto.Equal(got.GetLeaseExpiresAt(), ext.GetLeaseExpiresAt()) || got.GetState() != idempb.State_STATE_PENDING {
		t.Errorf("after extend, record = %v, want PENDING with lease %v", got, ext.GetLeaseExpiresAt())
	}
	outcome(t, "extend with another token", extend("k2", first.GetToken()+1, time.Minute).GetOutcome(), idempb.Outcome_OUTCOME_FENCED)
	outcome(t, "release with another token", release("k2", first.GetToken()+1), idempb.Outcome_OUTCOME_FENCED)

	outcome(t, "release by the holder", release("k2", first.GetToken()), idempb.Outcome_OUTCOME_OK)
	outcome(t, "get after release", c.get(t, "k2", idempb.Consistency_CONSISTENCY_LINEARIZABLE).GetOutcome(), idempb.Outcome_OUTCOME_NOT_FOUND)
	outcome(t, "retried release", release("k2", first.GetToken()), idempb.Outcome_OUTCOME_OK)

	second := c.mustWin(t, "k2", "owner-b", nil)
	if second.GetToken() <= first.GetToken() || second.GetAttempt() != 1 {
		t.Errorf("claim after release = %v, want a larger token than %d and attempt 1", second, first.GetToken())
	}
	outcome(t, "release by the released holder", release("k2", first.GetToken()), idempb.Outcome_OUTCOME_FENCED)
	outcome(t, "extend by the released holder", extend("k2", first.GetToken(), time.Minute).GetOutcome(), idempb.Outcome_OUTCOME_FENCED)

	fin, err := c.api.Complete(ctx, &idempb.CompleteRequest{Id: rid("k2"), Token: second.GetToken(), Response: storedResponse()})
	if err != nil || fin.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("complete = %v, %v; want OK", fin, err)
	}
	outcome(t, "release of a completed key", release("k2", second.GetToken()), idempb.Outcome_OUTCOME_FENCED)
	outcome(t, "extend of a completed key", extend("k2", second.GetToken(), time.Minute).GetOutcome(), idempb.Outcome_OUTCOME_FENCED)
}
