package rpc

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// badUTF8 is what the placeholder "BAD!" is replaced with on the wire:
// four bytes that are not UTF-8, so every length prefix stays right.
var badUTF8 = []byte{0xff, 0xfe, 0xc3, 0x28}

// withBadUTF8 marshals m and replaces the placeholder "BAD!" in it.
func withBadUTF8(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil || bytes.Count(b, []byte("BAD!")) != 1 {
		t.Fatalf("marshal %v: %v (want one placeholder)", m, err)
	}
	return bytes.Replace(b, []byte("BAD!"), badUTF8, 1)
}

// TestInvalidUTF8IsInvalidArgument sends requests whose strings hold
// invalid UTF-8: each is InvalidArgument, reason INVALID_FIELD, naming the
// field, and nothing is stored.
func TestInvalidUTF8IsInvalidArgument(t *testing.T) {
	t.Parallel()
	node := mustNode(t)
	_, conn := serveAPI(t, node, DefaultLimits(), ServerOptions()...)
	id := func(tenant, scope, key string) *idempb.RecordId {
		return &idempb.RecordId{Tenant: tenant, Scope: scope, Key: key}
	}
	resp := func(name, value string) *idempb.Response {
		return &idempb.Response{Status: 201, Headers: []*idempb.Header{{Name: "A", Value: "1"}, {Name: name, Value: value}}}
	}
	cases := []struct {
		name, method, field string
		req                 proto.Message
	}{
		{"claim tenant", "Claim", "id.tenant", &idempb.ClaimRequest{Id: id("BAD!", "s", "k"), Owner: "o"}},
		{"claim scope", "Claim", "id.scope", &idempb.ClaimRequest{Id: id("acme", "POST BAD!", "k"), Owner: "o"}},
		{"claim key", "Claim", "id.key", &idempb.ClaimRequest{Id: id("acme", "s", "kBAD!"), Owner: "o"}},
		{"claim owner", "Claim", "owner", &idempb.ClaimRequest{Id: id("acme", "s", "k"), Owner: "BAD!"}},
		{"complete header name", "Complete", "response.headers[1].name",
			&idempb.CompleteRequest{Id: id("acme", "s", "k"), Token: 1 << 16, Response: resp("BAD!", "v")}},
		{"complete header value", "Complete", "response.headers[1].value",
			&idempb.CompleteRequest{Id: id("acme", "s", "k"), Token: 1 << 16, Response: resp("X", "BAD!")}},
		{"release key", "Release", "id.key", &idempb.ReleaseRequest{Id: id("acme", "s", "BAD!"), Token: 1 << 16}},
		{"extend scope", "Extend", "id.scope", &idempb.ExtendRequest{Id: id("acme", "BAD!", "k"), Token: 1 << 16}},
		{"get tenant", "Get", "id.tenant", &idempb.GetRequest{Id: id("BAD!", "s", "k")}},
		{"wait key", "Wait", "id.key", &idempb.WaitRequest{Id: id("acme", "s", "BAD!"), Timeout: dur(time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := conn.Invoke(testCtx(t), "/idem.v1.Idempotency/"+tc.method, withBadUTF8(t, tc.req), new([]byte), grpc.ForceCodec(rawCodec{}))
			checkInvalid(t, err, tc.field)
			if n := node.Machine().Len(); n != 0 {
				t.Errorf("after a refused call, %d records are stored", n)
			}
		})
	}
	// The same bytes with the placeholder left in are accepted: each row
	// was refused for its invalid UTF-8 alone.
	won, err := idempb.NewIdempotencyClient(conn).Claim(testCtx(t), cases[0].req.(*idempb.ClaimRequest))
	if err != nil || won.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("the claim with the placeholder = %v, %v; want WON", won, err)
	}
}

// fakeStream is a server stream that receives one encoded message through
// textCodec, as gRPC would.
type fakeStream struct {
	grpc.ServerStream
	raw []byte
}

func (s fakeStream) Context() context.Context { return context.Background() }
func (s fakeStream) RecvMsg(m any) error {
	return textCodec{encoding.GetCodecV2("proto")}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(s.raw)}, m)
}

// TestInvalidUTF8OnStream checks that a message received on a stream is
// refused the same way, naming the field inside the forwarded call.
func TestInvalidUTF8OnStream(t *testing.T) {
	raw := withBadUTF8(t, &idempb.ForwardBatch{Calls: []*idempb.ForwardCall{
		{Request: &idempb.ForwardCall_Get{Get: &idempb.GetRequest{Id: rid("ok")}}},
		{Request: &idempb.ForwardCall_Claim{Claim: &idempb.ClaimRequest{Id: rid("k"), Owner: "BAD!"}}},
	}})
	var got error
	handler := func(_ any, ss grpc.ServerStream) error {
		got = ss.RecvMsg(&idempb.ForwardBatch{})
		return got
	}
	err := textStreamInterceptor(nil, fakeStream{raw: raw}, &grpc.StreamServerInfo{}, handler)
	if err == nil || !errors.Is(err, got) {
		t.Fatalf("stream = %v, handler saw %v", err, got)
	}
	checkInvalid(t, err, "calls[1].claim.owner")
}
