package rpc

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// limitsKey is the key of every valid base request below.
const limitsKey = "limits-key"

func validClaim() *idempb.ClaimRequest {
	return &idempb.ClaimRequest{Id: rid(limitsKey), Fingerprint: bytes.Repeat([]byte{7}, 32), Owner: "owner-1",
		Lease: dur(30 * time.Second), Ttl: dur(time.Hour)}
}

func validResponse() *idempb.Response {
	return &idempb.Response{Status: 200, Headers: []*idempb.Header{{Name: "A", Value: "1"}}, Body: []byte("ok")}
}

func headers(n int, value string) []*idempb.Header {
	out := make([]*idempb.Header, n)
	for i := range out {
		out[i] = &idempb.Header{Name: "H", Value: value}
	}
	return out
}

// limitCase is one refused request: the call and the field it must name.
type limitCase struct {
	name  string
	field string
	call  func(context.Context, idempb.IdempotencyClient) error
}

func claimWith(mut func(*idempb.ClaimRequest)) func(context.Context, idempb.IdempotencyClient) error {
	return func(ctx context.Context, api idempb.IdempotencyClient) error {
		r := validClaim()
		mut(r)
		_, err := api.Claim(ctx, r)
		return err
	}
}

func completeWith(mut func(*idempb.CompleteRequest)) func(context.Context, idempb.IdempotencyClient) error {
	return func(ctx context.Context, api idempb.IdempotencyClient) error {
		r := &idempb.CompleteRequest{Id: rid(limitsKey), Token: 1 << 16, Response: validResponse()}
		mut(r)
		_, err := api.Complete(ctx, r)
		return err
	}
}

func limitCases() []limitCase {
	long := func(n int) string { return strings.Repeat("x", n) }
	withKey := func(k string) func(*idempb.ClaimRequest) { return func(r *idempb.ClaimRequest) { r.Id.Key = k } }
	return append([]limitCase{
		{"tenant over 128 B", "id.tenant", claimWith(func(r *idempb.ClaimRequest) { r.Id.Tenant = long(129) })},
		{"scope over 256 B", "id.scope", claimWith(func(r *idempb.ClaimRequest) { r.Id.Scope = long(257) })},
		{"key empty", "id.key", claimWith(withKey(""))},
		{"key 256 B", "id.key", claimWith(withKey(long(256)))},
		{"key with a control byte", "id.key", claimWith(withKey("abc\x01def"))},
		{"key with DEL", "id.key", claimWith(withKey("abc\x7f"))},
		{"key not ASCII", "id.key", claimWith(withKey("clé"))},
		{"claim without id", "id", claimWith(func(r *idempb.ClaimRequest) { r.Id = nil })},
		{"owner empty", "owner", claimWith(func(r *idempb.ClaimRequest) { r.Owner = "" })},
		{"owner over 128 B", "owner", claimWith(func(r *idempb.ClaimRequest) { r.Owner = long(129) })},
		{"fingerprint over 64 B", "fingerprint", claimWith(func(r *idempb.ClaimRequest) { r.Fingerprint = make([]byte, 65) })},
		{"lease under 1s", "lease", claimWith(func(r *idempb.ClaimRequest) { r.Lease = dur(999 * time.Millisecond) })},
		{"lease over 1h", "lease", claimWith(func(r *idempb.ClaimRequest) { r.Lease = dur(time.Hour + 1) })},
		{"lease negative", "lease", claimWith(func(r *idempb.ClaimRequest) { r.Lease = dur(-time.Minute) })},
		{"lease malformed", "lease", claimWith(func(r *idempb.ClaimRequest) { r.Lease = &durationpb.Duration{Seconds: 5, Nanos: -1} })},
		{"ttl under 1m", "ttl", claimWith(func(r *idempb.ClaimRequest) { r.Ttl = dur(59 * time.Second) })},
		{"ttl over 30d", "ttl", claimWith(func(r *idempb.ClaimRequest) { r.Ttl = dur(30*24*time.Hour + time.Second) })},
		{"wait over max", "wait", claimWith(func(r *idempb.ClaimRequest) { r.Wait = dur(DefaultLimits().MaxWait + time.Second) })},
		{"wait negative", "wait", claimWith(func(r *idempb.ClaimRequest) { r.Wait = dur(-time.Second) })},

		{"complete token 0", "token", completeWith(func(r *idempb.CompleteRequest) { r.Token = 0 })},
		{"complete without id", "id", completeWith(func(r *idempb.CompleteRequest) { r.Id = nil })},
		{"complete key 256 B", "id.key", completeWith(func(r *idempb.CompleteRequest) { r.Id.Key = long(256) })},
		{"body over 1 MiB", "response.body", completeWith(func(r *idempb.CompleteRequest) { r.Response.Body = make([]byte, 1<<20+1) })},
		{"65 headers", "response.headers", completeWith(func(r *idempb.CompleteRequest) { r.Response.Headers = headers(65, "v") })},
		{"headers over 16 KiB", "response.headers", completeWith(func(r *idempb.CompleteRequest) { r.Response.Headers = headers(1, long(16<<10)) })},
		{"empty header name", "response.headers[1].name", completeWith(func(r *idempb.CompleteRequest) {
			r.Response.Headers = append(r.Response.Headers, &idempb.Header{Name: "", Value: "v"})
		})},
		{"header name with a space", "response.headers[1].name", completeWith(withHeader("Set Cookie", "v"))},
		{"header name with a colon", "response.headers[1].name", completeWith(withHeader("X-A:", "v"))},
		{"header name with CR LF", "response.headers[1].name", completeWith(withHeader("X\r\nSet-Cookie", "evil"))},
		{"header name not ASCII", "response.headers[1].name", completeWith(withHeader("X-Clé", "v"))},
		{"header value with CR LF", "response.headers[1].value", completeWith(withHeader("X-A", "x\r\nSet-Cookie: evil"))},
		{"header value with LF", "response.headers[1].value", completeWith(withHeader("X-A", "x\nSet-Cookie: evil"))},
		{"header value with CR", "response.headers[1].value", completeWith(withHeader("X-A", "x\r"))},
		{"header value with NUL", "response.headers[1].value", completeWith(withHeader("X-A", "a\x00b"))},
		{"status negative", "response.status", completeWith(func(r *idempb.CompleteRequest) { r.Response.Status = -1 })},
		{"status over 999", "response.status", completeWith(func(r *idempb.CompleteRequest) { r.Response.Status = 1000 })},

		{"release token 0", "token", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Release(ctx, &idempb.ReleaseRequest{Id: rid(limitsKey)})
			return err
		}},
		{"release without id", "id", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Release(ctx, &idempb.ReleaseRequest{Token: 1 << 16})
			return err
		}},
		{"extend token 0", "token", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Extend(ctx, &idempb.ExtendRequest{Id: rid(limitsKey), Lease: dur(time.Minute)})
			return err
		}},
		{"extend lease under 1s", "lease", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Extend(ctx, &idempb.ExtendRequest{Id: rid(limitsKey), Token: 1 << 16, Lease: dur(time.Millisecond)})
			return err
		}},
		{"extend lease over 1h", "lease", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Extend(ctx, &idempb.ExtendRequest{Id: rid(limitsKey), Token: 1 << 16, Lease: dur(2 * time.Hour)})
			return err
		}},
		{"get without id", "id", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Get(ctx, &idempb.GetRequest{})
			return err
		}},
		{"get key 256 B", "id.key", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Get(ctx, &idempb.GetRequest{Id: rid(long(256))})
			return err
		}},
		{"wait without id", "id", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Wait(ctx, &idempb.WaitRequest{Timeout: dur(time.Second)})
			return err
		}},
		{"wait timeout over max", "timeout", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Wait(ctx, &idempb.WaitRequest{Id: rid(limitsKey), Timeout: dur(DefaultLimits().MaxWait + time.Second)})
			return err
		}},
		{"get consistency 7", "consistency", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Get(ctx, &idempb.GetRequest{Id: rid(limitsKey), Consistency: 7})
			return err
		}},
		{"get consistency -1", "consistency", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Get(ctx, &idempb.GetRequest{Id: rid(limitsKey), Consistency: -1})
			return err
		}},
		{"wait consistency 7", "consistency", func(ctx context.Context, api idempb.IdempotencyClient) error {
			_, err := api.Wait(ctx, &idempb.WaitRequest{Id: rid(limitsKey), Timeout: dur(time.Second), Consistency: 7})
			return err
		}},
	}, textCases()...)
}

// withHeader appends a header after the valid one, so the refusal must
// name index 1.
func withHeader(name, value string) func(*idempb.CompleteRequest) {
	return func(r *idempb.CompleteRequest) {
		r.Response.Headers = append(r.Response.Headers, &idempb.Header{Name: name, Value: value})
	}
}

// textCases are the text rules of the record id (docs/API.md), the same
// with and without --auth: a tenant is printable ASCII without spaces, a
// scope printable UTF-8 without control characters, a key printable ASCII.
func textCases() []limitCase {
	withID := func(f func(*idempb.RecordId)) func(context.Context, idempb.IdempotencyClient) error {
		return claimWith(func(r *idempb.ClaimRequest) { f(r.Id) })
	}
	tenant := func(v string) func(context.Context, idempb.IdempotencyClient) error {
		return withID(func(id *idempb.RecordId) { id.Tenant = v })
	}
	scope := func(v string) func(context.Context, idempb.IdempotencyClient) error {
		return withID(func(id *idempb.RecordId) { id.Scope = v })
	}
	return []limitCase{
		{"tenant with a space", "id.tenant", tenant("ac me")},
		{"tenant with a tab", "id.tenant", tenant("ac\tme")},
		{"tenant with NUL", "id.tenant", tenant("acme\x00")},
		{"tenant with a newline", "id.tenant", tenant("acme\n")},
		{"tenant with DEL", "id.tenant", tenant("acme\x7f")},
		{"tenant not ASCII", "id.tenant", tenant("acmé")},
		{"scope with NUL", "id.scope", scope("POST\x00/v1")},
		{"scope with a newline", "id.scope", scope("POST /v1\n")},
		{"scope with a tab", "id.scope", scope("POST\t/v1")},
		{"scope with DEL", "id.scope", scope("POST /v1\x7f")},
		{"scope with a C1 control", "id.scope", scope("POST /v1\u0085")},
		{"scope with a bidi override", "id.scope", scope("POST /v1\u202e")},
		{"key with a tab", "id.key", withID(func(id *idempb.RecordId) { id.Key = "k\tk" })},
	}
}

// TestLimits checks every input limit of docs/API.md on both sides of
// its edge. The subtests share one node and run in order.
func TestLimits(t *testing.T) {
	t.Parallel()
	c := mustCluster(t)
	t.Run("refused", func(t *testing.T) { checkRefused(t, c) })
	t.Run("edges accepted", func(t *testing.T) { checkEdgesAccepted(t, c) })
}

// checkRefused sends one violation of every input limit and checks the
// answer is InvalidArgument naming the field and the limit, with nothing
// stored. The valid base request then succeeds, so each row failed for its
// own violation alone.
func checkRefused(t *testing.T, c *testCluster) {
	for _, tc := range limitCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(testCtx(t), c.api)
			checkInvalid(t, err, tc.field)
			if got := c.get(t, limitsKey, idempb.Consistency_CONSISTENCY_LINEARIZABLE).GetOutcome(); got != idempb.Outcome_OUTCOME_NOT_FOUND {
				t.Errorf("after a refused call, get = %v, want NOT_FOUND", got)
			}
			if st := c.status(t); st.GetRecords() != 0 {
				t.Errorf("after a refused call, %d records are stored", st.GetRecords())
			}
		})
	}
	resp := c.claim(t, validClaim())
	if resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("the valid base claim = %v, want WON", resp)
	}
	done, err := c.api.Complete(testCtx(t), &idempb.CompleteRequest{Id: rid(limitsKey), Token: resp.GetToken(), Response: validResponse()})
	if err != nil || done.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("the valid base complete = %v, %v; want OK", done, err)
	}
}

// checkInvalid requires InvalidArgument with an ErrorInfo naming field and
// a limit, and a BadRequest violation of the same field.
func checkInvalid(t *testing.T, err error, field string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	var info *errdetails.ErrorInfo
	var bad *errdetails.BadRequest
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.BadRequest:
			bad = d
		}
	}
	if info == nil {
		t.Fatalf("%v carries no ErrorInfo", err)
	}
	if info.GetReason() != idempb.ReasonInvalidField || info.GetDomain() != idempb.ErrorDomain {
		t.Errorf("ErrorInfo reason %q domain %q, want %q %q", info.GetReason(), info.GetDomain(), idempb.ReasonInvalidField, idempb.ErrorDomain)
	}
	if got := info.GetMetadata()["field"]; got != field {
		t.Errorf("ErrorInfo field = %q, want %q (%v)", got, field, err)
	}
	if info.GetMetadata()["limit"] == "" {
		t.Errorf("ErrorInfo names no limit: %v", err)
	}
	if bad == nil || len(bad.GetFieldViolations()) != 1 || bad.GetFieldViolations()[0].GetField() != field {
		t.Errorf("BadRequest = %v, want one violation of %q", bad, field)
	}
	if !strings.Contains(st.Message(), field) {
		t.Errorf("message %q does not name %q", st.Message(), field)
	}
}

// checkEdgesAccepted claims and completes with every value at the edge of
// its limit, which must all be accepted.
func checkEdgesAccepted(t *testing.T, c *testCluster) {
	long := func(n int) string { return strings.Repeat("x", n) }
	claims := map[string]func(*idempb.ClaimRequest){
		"tenant 128 B":     func(r *idempb.ClaimRequest) { r.Id.Tenant = long(128) },
		"scope 256 B":      func(r *idempb.ClaimRequest) { r.Id.Scope = long(256) },
		"key 255 B":        func(r *idempb.ClaimRequest) { r.Id.Key = long(255) },
		"key 1 B":          func(r *idempb.ClaimRequest) { r.Id.Key = "~" },
		"key of spaces":    func(r *idempb.ClaimRequest) { r.Id.Key = "  " },
		"owner 128 B":      func(r *idempb.ClaimRequest) { r.Owner = long(128) },
		"fingerprint 64 B": func(r *idempb.ClaimRequest) { r.Fingerprint = make([]byte, 64) },
		"no fingerprint":   func(r *idempb.ClaimRequest) { r.Fingerprint = nil },
		"lease 1s":         func(r *idempb.ClaimRequest) { r.Lease = dur(time.Second) },
		"lease 1h":         func(r *idempb.ClaimRequest) { r.Lease = dur(time.Hour) },
		"ttl 1m":           func(r *idempb.ClaimRequest) { r.Ttl = dur(time.Minute) },
		"ttl 30d":          func(r *idempb.ClaimRequest) { r.Ttl = dur(30 * 24 * time.Hour) },
		"defaults":         func(r *idempb.ClaimRequest) { r.Lease, r.Ttl = nil, nil },
		"default tenant":   func(r *idempb.ClaimRequest) { r.Id.Tenant = "" },
		"tenant of tchars": func(r *idempb.ClaimRequest) { r.Id.Tenant = "acme-EU_1.x~!#$%&'*+^`|/:@" },
		"scope of unicode": func(r *idempb.ClaimRequest) { r.Id.Scope = "POST /v1/zahlungen/ü €  \uFFFD" },
		"empty scope":      func(r *idempb.ClaimRequest) { r.Id.Scope = "" },
	}
	i := 0
	for name, mut := range claims {
		i++
		r := validClaim()
		r.Id.Scope = fmt.Sprintf("scope-%d", i)
		mut(r)
		if resp := c.claim(t, r); resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
			t.Errorf("%s: claim = %v, want WON", name, resp)
		}
	}
	responses := map[string]*idempb.Response{
		"body 1 MiB":       {Status: 999, Body: make([]byte, 1<<20)},
		"64 headers":       {Status: 0, Headers: headers(64, "v")},
		"headers 16 KiB":   {Headers: headers(1, long(16<<10-1))},
		"no response":      nil,
		"empty header val": {Headers: []*idempb.Header{{Name: "X"}}},
		"header of tchars": {Headers: []*idempb.Header{{Name: "!#$%&'*+-.^_`|~09azAZ", Value: "a\tb é \x7f"}}},
	}
	for name, resp := range responses {
		won := c.mustWin(t, "boundary "+name, "o", nil)
		out, err := c.api.Complete(testCtx(t), &idempb.CompleteRequest{Id: rid("boundary " + name), Token: won.GetToken(), Response: resp})
		if err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_OK {
			t.Errorf("%s: complete = %v, %v; want OK", name, out, err)
		}
	}
}
