package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc"
)

// authCluster is a one-node cluster that takes
// tenants from bearer tokens (acme's and globex's), with limits and, when
// rate is set, that claim rate per tenant.
func authCluster(t *testing.T, limits rpc.Limits, rate *rpc.ClaimRateLimit) *testcluster.Cluster {
	t.Helper()
	tokens := testcluster.Tokens(t, map[string]string{"acme-secret-token-0001": "acme", "globex-secret-token-0002": "globex"})
	auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	unary := []grpc.UnaryServerInterceptor{auth.UnaryInterceptor()}
	if rate != nil {
		unary = append(unary, rate.UnaryInterceptor())
	}
	return testcluster.Start(t, 1, testcluster.Options{Limits: &limits,
		// One node: bootstrap alone (bootstrap-expect needs two or more).
		Tune: func(cfg *cluster.Config) { cfg.Bootstrap, cfg.Join = true, nil },
		ServerOptions: func(*testcluster.Node) []grpc.ServerOption {
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...),
				grpc.ChainStreamInterceptor(auth.StreamInterceptor())}
		}})
}

// TestTokens: the SDK sends a bearer token, the server derives the tenant
// from it, and two tenants using the same scope and key each run their
// side effect once, in their own namespace. A token meant for TLS is not
// sent over plaintext, and no token at all is refused.
func TestTokens(t *testing.T) {
	t.Parallel()
	c := authCluster(t, rpc.DefaultLimits(), nil)
	ctx := testCtx(t)
	id := client.ID{Scope: "POST /v1/charges", Key: client.NewKey()} // no tenant: the token's
	runs := map[string]int{}
	for _, tc := range []struct{ tenant, token string }{
		{"acme", "acme-secret-token-0001"}, {"globex", "globex-secret-token-0002"}, {"acme", "acme-secret-token-0001"},
	} {
		cl := newClient(t, c, func(cfg *client.Config) {
			cfg.DialOptions = append(cfg.DialOptions, client.WithInsecureToken(tc.token))
		})
		res, err := cl.Do(ctx, id, []byte("fp"), func(context.Context) (client.Response, error) {
			runs[tc.tenant]++
			return client.Response{Status: 201, Body: []byte(tc.tenant)}, nil
		})
		if err != nil || string(res.Response.Body) != tc.tenant {
			t.Fatalf("%s: Do = %+v, %v; want its own response", tc.tenant, res, err)
		}
		rec, err := cl.Get(ctx, id)
		if err != nil || rec.ID.Tenant != tc.tenant {
			t.Fatalf("%s: Get = %+v, %v; want a record of %s", tc.tenant, rec, err, tc.tenant)
		}
	}
	if runs["acme"] != 1 || runs["globex"] != 1 {
		t.Fatalf("side effects ran %v, want once per tenant", runs)
	}

	// gRPC refuses to dial with a TLS-only token over plaintext at all.
	tlsOnly := newClient(t, c, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, client.WithToken("acme-secret-token-0001"))
	})
	_, err := tlsOnly.Claim(ctx, client.ID{Scope: "POST /v1/charges", Key: client.NewKey()}, []byte("fp"))
	if err == nil || !strings.Contains(err.Error(), "transport level security") {
		t.Errorf("a TLS-only token over plaintext: %v, want a refusal to dial", err)
	}
	anon := newClient(t, c)
	_, err = anon.Claim(ctx, client.ID{Scope: "POST /v1/charges", Key: client.NewKey()}, []byte("fp"))
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token: %v, want Unauthenticated", err)
	}
}

// TestLimitErrors: a tenant past its key quota gets ErrQuotaExceeded, past
// its claim rate ErrRateLimited, each with the server's retry hint.
func TestLimitErrors(t *testing.T) {
	t.Parallel()
	limits := rpc.DefaultLimits()
	limits.TenantMaxKeys = 2
	rate, err := rpc.NewClaimRateLimit(0.5, 3) // 3 claims, then one per 2 s
	if err != nil {
		t.Fatal(err)
	}
	c := authCluster(t, limits, rate)
	cl := newClient(t, c, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, client.WithInsecureToken("acme-secret-token-0001"))
	})
	ctx := testCtx(t)
	claim := func() error {
		_, err := cl.Claim(ctx, client.ID{Scope: "POST /v1/charges", Key: client.NewKey()}, []byte("fp"))
		return err
	}
	for i := range 2 {
		if err := claim(); err != nil {
			t.Fatalf("claim %d: %v", i+1, err)
		}
	}
	for _, want := range []error{client.ErrQuotaExceeded, client.ErrRateLimited} {
		err := claim()
		if after, ok := client.RetryAfter(err); !errors.Is(err, want) || !ok || after <= 0 {
			t.Fatalf("claim: %v (retry after %v, %v), want %v with a retry hint", err, after, ok, want)
		}
	}
}
