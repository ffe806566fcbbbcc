package jsonapi_test

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestBadInput: every input the API refuses is a 400 with the
// google.rpc.Status JSON shape, naming the field and the limit where the
// gRPC API does, and nothing is stored.
func TestBadInput(t *testing.T) {
	base := shared.Nodes[0].JSONURL()
	key := rand.Text()
	id := recordID(key)
	for _, tc := range []struct {
		what, body string
		reason     string
		field      string
	}{
		{"a TTL over 30 days", fmt.Sprintf(`{"id":%s,"owner":"o","ttl":"2592001s"}`, id), idempb.ReasonInvalidField, "ttl"},
		{"no owner", fmt.Sprintf(`{"id":%s}`, id), idempb.ReasonInvalidField, "owner"},
		{"a key with a control byte", fmt.Sprintf(`{"id":{"key":"a\u0001b"},"owner":"o"}`), idempb.ReasonInvalidField, "id.key"},
		{"a misspelled field", fmt.Sprintf(`{"id":%s,"owner":"o","fingerprnt":"AQI="}`, id), "INVALID_JSON", ""},
		{"a field of the wrong type", fmt.Sprintf(`{"id":%s,"owner":7}`, id), "INVALID_JSON", ""},
		{"bytes that are not base64", fmt.Sprintf(`{"id":%s,"owner":"o","fingerprint":"!!"}`, id), "INVALID_JSON", ""},
		{"a duration without a unit", fmt.Sprintf(`{"id":%s,"owner":"o","ttl":3600}`, id), "INVALID_JSON", ""},
		{"a second JSON value", fmt.Sprintf(`{"id":%s,"owner":"o"} {"owner":"p"}`, id), "INVALID_JSON", ""},
		{"no JSON at all", `owner=o`, "INVALID_JSON", ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			f := fail(t, base, http.MethodPost, "/v1/claim", tc.body)
			f.want(t, http.StatusBadRequest, codes.InvalidArgument, tc.reason)
			if tc.field != "" && (f.info.Metadata["field"] != tc.field || f.info.Metadata["limit"] == "") {
				t.Fatalf("metadata %v, want field %q and its limit", f.info.Metadata, tc.field)
			}
		})
	}
	f := fail(t, base, http.MethodPost, "/v1/claim", fmt.Sprintf(`{"id":%s,"owner":"o"}`, id), "Grpc-Timeout", "soon")
	f.want(t, http.StatusBadRequest, codes.InvalidArgument, idempb.ReasonInvalidField)
	if f.info.Metadata["field"] != "Grpc-Timeout" {
		t.Fatalf("a bad Grpc-Timeout: metadata %v", f.info.Metadata)
	}
	var got idempb.GetResponse
	post(t, base, "/v1/get", fmt.Sprintf(`{"id":%s}`, id), &got)
	if got.Outcome != idempb.Outcome_OUTCOME_NOT_FOUND {
		t.Fatalf("after refused claims the key is %v, want NOT_FOUND", got.Outcome)
	}
}

// TestBodyLimit: a body past the limit is refused before it is decoded,
// naming the limit; a response body of the largest storable size is not.
func TestBodyLimit(t *testing.T) {
	base := shared.Nodes[0].JSONURL()
	limit := rpc.DefaultLimits().MaxMessageBytes/3*4 + 64<<10
	huge := fmt.Sprintf(`{"id":%s,"owner":"%s"}`, recordID(rand.Text()), strings.Repeat("o", limit))
	f := fail(t, base, http.MethodPost, "/v1/claim", huge)
	f.want(t, http.StatusBadRequest, codes.InvalidArgument, idempb.ReasonInvalidField)
	if f.info.Metadata["field"] != "body" || f.info.Metadata["limit"] != strconv.Itoa(limit)+" bytes" {
		t.Fatalf("metadata %v, want field body and limit %d bytes", f.info.Metadata, limit)
	}
	id := recordID(rand.Text())
	var won idempb.ClaimResponse
	post(t, base, "/v1/claim", fmt.Sprintf(`{"id":%s,"owner":"o"}`, id), &won)
	largest := strings.Repeat("A", (1<<20)/3*4) // base64 of 1 MiB less a byte or two
	var done idempb.CompleteResponse
	post(t, base, "/v1/complete", fmt.Sprintf(`{"id":%s,"token":"%d","response":{"status":200,"body":%q}}`, id, won.Token, largest), &done)
	if done.Outcome != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("complete with a body of about 1 MiB: %v", done.Outcome)
	}
}

// TestRouting: a path the API lacks is a 404, a method a path does not take
// a 405, both in the same JSON shape.
func TestRouting(t *testing.T) {
	base := shared.Nodes[0].JSONURL()
	if f := fail(t, base, http.MethodPost, "/v1/nope", `{}`); f.http != http.StatusNotFound || f.st.Code() != codes.NotFound {
		t.Fatalf("unknown path: HTTP %d %s", f.http, f.st.Code())
	}
	if f := fail(t, base, http.MethodGet, "/v1/claim", ""); f.http != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/claim: HTTP %d %s", f.http, f.st.Code())
	}
}

// authCluster is one node with bearer tokens for acme and globex and a
// claim rate of one per second with no burst.
func authCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	tokens := testcluster.Tokens(t, map[string]string{"acme-secret-token-0001": "acme", "globex-secret-token-0002": "globex"})
	auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	rate, err := rpc.NewClaimRateLimit(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return testcluster.Start(t, 1, testcluster.Options{JSON: true,
		Tune:   func(cfg *cluster.Config) { cfg.Bootstrap, cfg.Join = true, nil },
		Unary:  []grpc.UnaryServerInterceptor{auth.UnaryInterceptor(), rate.UnaryInterceptor()},
		Stream: []grpc.StreamServerInterceptor{auth.StreamInterceptor()}})
}

// TestAuth: the bearer token decides the tenant as on the gRPC port: none
// is a 401 that asks for one, another tenant a 403, an admin method without
// an admin identity a 403; a tenant over its claim rate gets a 429 with
// Retry-After.
func TestAuth(t *testing.T) {
	c := authCluster(t)
	base := c.Nodes[0].JSONURL()
	acme := []string{"Authorization", "Bearer acme-secret-token-0001"}
	body := fmt.Sprintf(`{"id":{"scope":"POST /v1/charges","key":%q},"owner":"o"}`, rand.Text())

	f := fail(t, base, http.MethodPost, "/v1/claim", body)
	f.want(t, http.StatusUnauthorized, codes.Unauthenticated, idempb.ReasonUnauthenticated)
	a := call(t, base, http.MethodPost, "/v1/claim", body)
	if got := a.header.Get("WWW-Authenticate"); got != `Bearer realm="idemnode"` {
		t.Errorf("WWW-Authenticate %q, want a Bearer challenge", got)
	}
	fail(t, base, http.MethodPost, "/v1/claim", body, "Authorization", "Bearer wrong-token-000000000").
		want(t, http.StatusUnauthorized, codes.Unauthenticated, idempb.ReasonUnauthenticated)

	other := fmt.Sprintf(`{"id":{"tenant":"globex","scope":"POST /v1/charges","key":%q},"owner":"o"}`, rand.Text())
	fail(t, base, http.MethodPost, "/v1/claim", other, acme...).want(t, http.StatusForbidden, codes.PermissionDenied, idempb.ReasonTenantMismatch)
	fail(t, base, http.MethodPost, "/v1/members", `{}`, acme...).want(t, http.StatusForbidden, codes.PermissionDenied, idempb.ReasonAdminRequired)

	var won idempb.ClaimResponse
	post(t, base, "/v1/claim", body, &won, acme...)
	if won.Outcome != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("acme's claim: %v", won.Outcome)
	}
	limited := fail(t, base, http.MethodPost, "/v1/claim", fmt.Sprintf(`{"id":{"key":%q},"owner":"o"}`, rand.Text()), acme...)
	limited.want(t, http.StatusTooManyRequests, codes.ResourceExhausted, idempb.ReasonRateLimited)
	a = call(t, base, http.MethodPost, "/v1/claim", fmt.Sprintf(`{"id":{"key":%q},"owner":"o"}`, rand.Text()), acme...)
	if n, err := strconv.Atoi(a.header.Get("Retry-After")); a.status != http.StatusTooManyRequests || err != nil || n < 1 {
		t.Fatalf("HTTP %d Retry-After %q, want 429 with whole seconds", a.status, a.header.Get("Retry-After"))
	}
}

// TestContentType: a POST must say its body is JSON; a form or text body,
// which a browser sends cross-site without asking first, is 415.
func TestContentType(t *testing.T) {
	base := shared.Nodes[0].JSONURL()
	body := fmt.Sprintf(`{"id":%s,"owner":"o"}`, recordID(rand.Text()))
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		f := fail(t, base, http.MethodPost, "/v1/claim", body, "Content-Type", ct)
		if f.http != http.StatusUnsupportedMediaType || f.info.GetReason() != "INVALID_JSON" {
			t.Errorf("Content-Type %q: HTTP %d %s", ct, f.http, f.st.Message())
		}
	}
	var won idempb.ClaimResponse
	post(t, base, "/v1/claim", body, &won, "Content-Type", "application/json; charset=utf-8")
	if won.Outcome != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("a claim with a charset: %v", won.Outcome)
	}
}
