package rpc

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// checkRetryHint requires ResourceExhausted with reason, a RetryInfo of at
// least minDelay, and returns the ErrorInfo metadata.
func checkRetryHint(t *testing.T, what string, err error, reason string, minDelay time.Duration) map[string]string {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%s: %v, want ResourceExhausted", what, err)
	}
	var meta map[string]string
	var delay *time.Duration
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetReason() != reason {
				t.Fatalf("%s: reason %s, want %s", what, d.GetReason(), reason)
			}
			meta = d.GetMetadata()
		case *errdetails.RetryInfo:
			v := d.GetRetryDelay().AsDuration()
			delay = &v
		}
	}
	if meta == nil || delay == nil || *delay < minDelay {
		t.Fatalf("%s: details %v, want ErrorInfo %s and a RetryInfo of at least %s", what, st.Details(), reason, minDelay)
	}
	return meta
}

// TestQuotaExceeded: the state machine's QUOTA_EXCEEDED reaches the client
// as ResourceExhausted with a retry hint, stores nothing, and leaves other
// tenants alone.
func TestQuotaExceeded(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	limits.TenantMaxKeys, limits.TenantMaxBytes, limits.QuotaRetryAfter = 2, 4096, 3*time.Second
	_, conn := serveAPI(t, mustNode(t), limits)
	api := idempb.NewIdempotencyClient(conn)
	ctx := testCtx(t)
	claim := func(tenant, key string) (*idempb.ClaimResponse, error) {
		return api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID(tenant, key), Owner: "o"})
	}
	var tokens []uint64
	for _, key := range []string{"a", "b"} {
		resp, err := claim("acme", key)
		if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("claim %s under the quota: %v, %v", key, resp, err)
		}
		tokens = append(tokens, resp.GetToken())
	}
	_, err := claim("acme", "c")
	meta := checkRetryHint(t, "claim past the key quota", err, idempb.ReasonQuotaExceeded, 3*time.Second)
	if meta["quota"] != "keys" || meta["limit"] != "2" || meta["tenant"] != "acme" {
		t.Fatalf("metadata %v", meta)
	}
	if resp, err := claim("acme", "a"); err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("a retried claim at the quota: %v, %v; want WON", resp, err)
	}
	if resp, err := claim("globex", "c"); err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("another tenant's claim: %v, %v; want WON", resp, err)
	}

	big := &idempb.Response{Status: 200, Body: bytes.Repeat([]byte("x"), 5000)}
	_, err = api.Complete(ctx, &idempb.CompleteRequest{Id: tenantID("acme", "a"), Token: tokens[0], Response: big})
	if meta := checkRetryHint(t, "complete past the byte quota", err, idempb.ReasonQuotaExceeded, 3*time.Second); meta["quota"] != "bytes" {
		t.Fatalf("metadata %v", meta)
	}
	got, err := api.Get(ctx, &idempb.GetRequest{Id: tenantID("acme", "a")})
	if err != nil || got.GetRecord().GetState() != idempb.State_STATE_PENDING || got.GetRecord().GetToken() != tokens[0] {
		t.Fatalf("after the refused completion: %v, %v; want PENDING under the same token", got, err)
	}
	small := &idempb.Response{Status: 200, Body: []byte("ok")}
	if resp, err := api.Complete(ctx, &idempb.CompleteRequest{Id: tenantID("acme", "a"), Token: tokens[0], Response: small}); err != nil ||
		resp.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("a completion that fits: %v, %v", resp, err)
	}
}

// largestRequest is a Complete with every field at its limit.
func largestRequest(l Limits) *idempb.CompleteRequest {
	long := func(n int) string { return strings.Repeat("x", n) }
	hdrs := make([]*idempb.Header, l.MaxHeaders)
	per := l.MaxHeaderBytes / l.MaxHeaders
	for i := range hdrs {
		hdrs[i] = &idempb.Header{Name: "N", Value: long(per - 1)}
	}
	return &idempb.CompleteRequest{
		Id:       &idempb.RecordId{Tenant: long(l.MaxTenant), Scope: long(l.MaxScope), Key: long(l.MaxKey)},
		Token:    ^uint64(0),
		Response: &idempb.Response{Status: 999, Headers: hdrs, Body: bytes.Repeat([]byte{0xff}, l.MaxBody)},
	}
}

// TestMessageSizeLimit: the largest valid request passes the gRPC limit
// (and validation); a body just over the limit is InvalidArgument; a
// message over MaxMessageBytes is ResourceExhausted before it is decoded;
// the node serves on and another tenant's record is intact.
func TestMessageSizeLimit(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	largest := largestRequest(limits)
	size := proto.Size(largest)
	if size > limits.MaxMessageBytes || limits.MaxMessageBytes-size > messageSlack {
		t.Fatalf("largest valid request %d B, limit %d B: want the limit just above it", size, limits.MaxMessageBytes)
	}
	t.Logf("largest valid request %d B, limit %d B", size, limits.MaxMessageBytes)
	node := mustNode(t)
	_, conn := serveAPI(t, node, limits, limits.ServerOptions()...)
	api := idempb.NewIdempotencyClient(conn)
	ctx := testCtx(t)
	kept, err := api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("globex", "kept"), Owner: "o"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}

	if resp, err := api.Complete(ctx, largest); err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_NOT_FOUND {
		t.Fatalf("largest valid request: %v, %v; want NOT_FOUND (it passed every limit)", resp, err)
	}
	over := proto.Clone(largest).(*idempb.CompleteRequest)
	over.Response.Body = append(over.Response.Body, 0)
	_, err = api.Complete(ctx, over)
	checkInvalid(t, err, "response.body")
	huge := proto.Clone(largest).(*idempb.CompleteRequest)
	huge.Response.Body = make([]byte, 4<<20)
	if _, err := api.Complete(ctx, huge); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 4 MiB message: %v, want ResourceExhausted", err)
	}
	for range 3 { // and again: nothing of it lingers
		if _, err := api.Complete(ctx, huge); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("a 4 MiB message again: %v, want ResourceExhausted", err)
		}
	}
	// Bytes that are no protobuf at all: refused, nothing stored.
	garbage := []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01}
	err = conn.Invoke(ctx, idempb.Idempotency_Claim_FullMethodName, garbage, new([]byte), grpc.ForceCodec(rawCodec{}))
	if code := status.Code(err); code != codes.Internal || !strings.Contains(err.Error(), "unmarshal") {
		t.Fatalf("a malformed message: %v, want the server's unmarshalling error", err)
	}
	if resp, err := api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("acme", "after"), Owner: "o"}); err != nil ||
		resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim after the oversized messages: %v, %v", resp, err)
	}
	got, err := api.Get(ctx, &idempb.GetRequest{Id: tenantID("globex", "kept")})
	if err != nil || got.GetRecord().GetToken() != kept.GetToken() {
		t.Fatalf("globex's record after the oversized messages: %v, %v", got, err)
	}
}

// rawCodec sends and receives bytes as they are, to put malformed messages
// on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }
