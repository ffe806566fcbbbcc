package idemhttp_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc"
)

// The bearer tokens of the limited clusters' tenants.
const (
	acmeToken   = "acme-token-0123456789"
	globexToken = "globex-token-0123456789"
)

// limitedCluster is three nodes that take the
// tenant from bearer tokens (acmeToken, globexToken), with limits and,
// when rate > 0, a claim rate per tenant and node.
func limitedCluster(t *testing.T, limits rpc.Limits, rate float64, burst int) *testcluster.Cluster {
	t.Helper()
	tokens := testcluster.Tokens(t, map[string]string{acmeToken: "acme", globexToken: "globex"})
	// Plaintext with tokens: nodes forward unary, with the caller's token.
	return testcluster.Start(t, 3, testcluster.Options{Limits: &limits,
		APIOptions: []rpc.Option{rpc.WithUnaryForwarding()},
		ServerOptions: func(*testcluster.Node) []grpc.ServerOption {
			auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens})
			if err != nil {
				t.Fatal(err)
			}
			unary := []grpc.UnaryServerInterceptor{auth.UnaryInterceptor()}
			if rate > 0 {
				limit, err := rpc.NewClaimRateLimit(rate, burst) // one bucket table per node
				if err != nil {
					t.Fatal(err)
				}
				unary = append(unary, limit.UnaryInterceptor())
			}
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(auth.StreamInterceptor())}
		}})
}

// clientOf dials every node of c with token.
func clientOf(t *testing.T, c *testcluster.Cluster, token string) *client.Client {
	t.Helper()
	cfg := client.Config{DialOptions: []grpc.DialOption{client.WithInsecureToken(token)}}
	for _, nd := range c.Nodes {
		cfg.Addrs = append(cfg.Addrs, nd.GRPCAddr())
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// fixedTenant is a Config.Tenant naming one tenant for every request.
func fixedTenant(tenant string) func(*http.Request) (string, error) {
	return func(*http.Request) (string, error) { return tenant, nil }
}

// logBuffer collects a slog.Logger's lines; handlers write concurrently.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// wantNotStored fails unless no record of id exists.
func wantNotStored(t *testing.T, cl *client.Client, id client.ID) {
	t.Helper()
	if rec, err := cl.Get(testCtx(t), id); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("%s: record %+v, err %v; want nothing stored", id, rec, err)
	}
}

// wantRetryAfter fails unless got's Retry-After is one of the values.
func wantRetryAfter(t *testing.T, what string, got reply, values ...string) {
	t.Helper()
	ra := got.header.Get("Retry-After")
	for _, v := range values {
		if ra == v {
			return
		}
	}
	t.Errorf("%s: Retry-After %q, want one of %v (the server's hint)", what, ra, values)
}

// TestRateLimitedIs429 runs tenant acme past its claim rate (burst 3, then
// one claim every 5 s): the first three requests run the handler, the rest
// are answered 429 with the server's hint as Retry-After, without running
// the handler or storing anything.
func TestRateLimitedIs429(t *testing.T) {
	t.Parallel()
	c := limitedCluster(t, rpc.DefaultLimits(), 0.2, 3)
	cl := clientOf(t, c, acmeToken)
	h := &charges{}
	srv := serve(t, idemhttp.Config{Client: cl, Tenant: fixedTenant("acme")}, h)
	scope := "POST /v1/charges"

	var keys []string
	var answers []reply
	for range 6 {
		keys = append(keys, client.NewKey())
		answers = append(answers, request(t, "POST", srv.URL+"/v1/charges", keys[len(keys)-1], `{"amount":1}`))
	}
	for i, got := range answers {
		id := client.ID{Tenant: "acme", Scope: scope, Key: keys[i]}
		if i < 3 {
			wantStatus(t, fmt.Sprintf("request %d, within the burst", i+1), got, http.StatusCreated)
			if rec, err := cl.Get(testCtx(t), id); err != nil || rec.State != client.StateCompleted {
				t.Errorf("request %d: record %+v, err %v; want it completed", i+1, rec, err)
			}
			continue
		}
		what := fmt.Sprintf("request %d, past the rate", i+1)
		wantProblem(t, what, got, http.StatusTooManyRequests, idemhttp.ProblemRateLimited)
		// The next token is due 5 s after the burst was spent, less the
		// time since: 5 rounded up, or 4 on a slow machine.
		wantRetryAfter(t, what, got, "5", "4")
		wantNotStored(t, cl, id)
	}
	wantRuns(t, h, 3)
}

// TestQuotaAndCredentials: past the key quota a claim is answered 429 with
// the server's Retry-After and the handler does not run; a completion past
// the byte quota still sends the handler's response (it ran) and logs the
// refusal; credentials the service refuses are the middleware's fault, 500.
func TestQuotaAndCredentials(t *testing.T) {
	t.Parallel()
	limits := rpc.DefaultLimits()
	limits.TenantMaxKeys, limits.TenantMaxBytes, limits.QuotaRetryAfter = 3, 4<<10, 3*time.Second
	c := limitedCluster(t, limits, 0, 0)
	acme := clientOf(t, c, acmeToken)
	scope := "POST /v1/charges"

	t.Run("key quota", func(t *testing.T) {
		h := &charges{}
		srv := serve(t, idemhttp.Config{Client: acme, Tenant: fixedTenant("acme")}, h)
		url := srv.URL + "/v1/charges"
		var keys []string
		for i := range 3 {
			keys = append(keys, client.NewKey())
			wantStatus(t, fmt.Sprintf("key %d of 3", i+1), request(t, "POST", url, keys[i], `{"amount":1}`), http.StatusCreated)
		}
		over := client.NewKey()
		got := request(t, "POST", url, over, `{"amount":1}`)
		wantProblem(t, "a 4th key", got, http.StatusTooManyRequests, idemhttp.ProblemQuotaExceeded)
		wantRetryAfter(t, "a 4th key", got, "3")
		wantRuns(t, h, 3)
		wantNotStored(t, acme, client.ID{Tenant: "acme", Scope: scope, Key: over})
		// A retry of a stored key is a replay, never refused.
		again := request(t, "POST", url, keys[0], `{"amount":1}`)
		if again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("a replay at the quota: %d (replayed %q), want the stored 201", again.status, again.header.Get("Idempotent-Replayed"))
		}
		wantRuns(t, h, 3)
	})

	t.Run("byte quota on completion", func(t *testing.T) {
		var logs logBuffer
		var runs atomic.Int64
		big := strings.Repeat("x", 6<<10) // past globex's 4 KiB
		srv := serve(t, idemhttp.Config{Client: clientOf(t, c, globexToken), Tenant: fixedTenant("globex"), Logger: logs.logger()},
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.WriteHeader(http.StatusCreated)
				fmt.Fprint(w, big)
			}), idemhttp.WaitFor(100*time.Millisecond))
		key := client.NewKey()
		got := request(t, "POST", srv.URL+"/v1/exports", key, `{}`)
		if got.status != http.StatusCreated || got.body != big {
			t.Fatalf("a response past the byte quota: %d with %d bytes, want the handler's 201 (it ran)", got.status, len(got.body))
		}
		if l := logs.String(); !strings.Contains(l, "not recorded") || !strings.Contains(l, "quota exceeded") {
			t.Errorf("log %q: want the unrecorded response and the quota named", l)
		}
		// The key stays claimed until the lease ends: a retry does not run
		// the handler again meanwhile.
		retry := request(t, "POST", srv.URL+"/v1/exports", key, `{}`)
		wantProblem(t, "a retry within the lease", retry, http.StatusConflict, idemhttp.ProblemInFlight)
		if n := runs.Load(); n != 1 {
			t.Errorf("handler ran %d times, want once", n)
		}
	})

	t.Run("refused credentials are 500", func(t *testing.T) {
		for _, tc := range []struct {
			name, token, tenant, code string
		}{
			{"unknown token", "revoked-token-0123456789", "acme", "Unauthenticated"},
			{"tenant other than the token's", acmeToken, "globex", "PermissionDenied"},
		} {
			var logs logBuffer
			h := &charges{}
			srv := serve(t, idemhttp.Config{Client: clientOf(t, c, tc.token), Tenant: fixedTenant(tc.tenant), Logger: logs.logger()}, h)
			got := request(t, "POST", srv.URL+"/v1/charges", client.NewKey(), `{"amount":1}`)
			wantProblem(t, tc.name, got, http.StatusInternalServerError, idemhttp.ProblemMisconfigured)
			if ra := got.header.Get("Retry-After"); ra != "" {
				t.Errorf("%s: Retry-After %q; a retry does not help until the configuration is fixed", tc.name, ra)
			}
			if l := logs.String(); !strings.Contains(l, "refused the middleware's credentials") || !strings.Contains(l, "code="+tc.code) {
				t.Errorf("%s: log %q, want the refusal with code %s", tc.name, l, tc.code)
			}
			wantRuns(t, h, 0)
		}
	})
}
