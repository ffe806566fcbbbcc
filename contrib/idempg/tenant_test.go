package idempg_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
	"github.com/idemnode/idemnode/contrib/idempg/internal/pgtest"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc"
)

// TestTenantsShareTheTable: two tenants of a cluster with authentication
// leave id.Tenant empty, as the SDK tells them to, and use the same scope
// and key against one table. Each tenant's function runs and each gets its
// own response: rows are keyed by Options.Tenant. A Runner with neither
// tenant refuses the call before claiming.
func TestTenantsShareTheTable(t *testing.T) {
	srv := pgtest.Shared(t)
	_, db := srv.NewDB(t)
	ctx := context.Background()
	if err := idempg.Migrate(ctx, db, idempg.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, effectsDDL); err != nil {
		t.Fatal(err)
	}
	tokens := testcluster.Tokens(t, map[string]string{"acme-token-0123456789": "acme", "globex-token-0123456789": "globex"})
	c := testcluster.Start(t, 3, testcluster.Options{APIOptions: []rpc.Option{rpc.WithUnaryForwarding()},
		ServerOptions: func(*testcluster.Node) []grpc.ServerOption {
			auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens})
			if err != nil {
				t.Fatal(err)
			}
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(auth.UnaryInterceptor()), grpc.ChainStreamInterceptor(auth.StreamInterceptor())}
		}})
	runnerOf := func(token, tenant string) (*idempg.Runner, *client.Client) {
		cl := newClient(t, addrs(c), func(cfg *client.Config) {
			cfg.DialOptions = append(cfg.DialOptions, client.WithInsecureToken(token))
		})
		r, err := idempg.New(db, cl, idempg.Options{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		return r, cl
	}
	acme, acmeCl := runnerOf("acme-token-0123456789", "acme")
	globex, _ := runnerOf("globex-token-0123456789", "globex")
	id := client.ID{Scope: "POST /effects", Key: "shared"}
	a, err := acme.Do(ctx, id, fingerprint, effect("acme"))
	if err != nil || !a.Executed {
		t.Fatalf("acme: %+v, %v; want executed", a, err)
	}
	g, err := globex.Do(ctx, id, fingerprint, effect("globex"))
	if err != nil || !g.Executed || !strings.HasSuffix(string(g.Response.Body), "by globex") {
		t.Fatalf("globex: executed %v, %q, %v; want its own function run, not acme's response", g.Executed, g.Response.Body, err)
	}
	var rows int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM idempg_effects WHERE tenant IN ('acme', 'globex')").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("rows of acme and globex: %d, %v; want 2", rows, err)
	}

	noTenant, err := idempg.New(db, acmeCl, idempg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := client.ID{Scope: "POST /effects", Key: "no-tenant"}
	if _, err := noTenant.Do(ctx, other, fingerprint, effect("x")); err == nil || !strings.Contains(err.Error(), "Options.Tenant") {
		t.Errorf("Do with no tenant anywhere: %v; want a refusal naming Options.Tenant", err)
	}
	if _, err := acme.Do(ctx, client.ID{Tenant: "globex", Scope: other.Scope, Key: other.Key}, fingerprint, effect("x")); err == nil ||
		!strings.Contains(err.Error(), `Options.Tenant "acme"`) {
		t.Errorf("Do with another tenant than Options.Tenant: %v; want a refusal", err)
	}
	if _, err := acmeCl.Get(ctx, other); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("a refused Do left a record: %v", err)
	}
}
