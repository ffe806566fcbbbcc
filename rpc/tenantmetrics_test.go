package rpc

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// gatherByTenant returns the values of name's series by their tenant label.
func gatherByTenant(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			tenant := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" {
					tenant = l.GetValue()
				}
			}
			out[tenant] = v
		}
	}
	return out
}

// TestTenantSeriesAreBounded: of 14 tenants, only the 10 with the most
// claims have a claims series, and only the 10 nearest their quota have
// usage series; the quotas are exported as they are stamped.
func TestTenantSeriesAreBounded(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	limits.TenantMaxKeys, limits.TenantMaxBytes = 100, 1<<20
	reg := prometheus.NewRegistry()
	s := NewServer(mustNode(t), limits, nil, WithMetrics(NewMetrics(reg), reg))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	api := idempb.NewIdempotencyClient(conn)
	ctx := testCtx(t)

	// Tenant tN claims N distinct keys, and once more a key it holds.
	for n := 1; n <= 14; n++ {
		tenant := fmt.Sprintf("t%02d", n)
		for k := range n {
			if _, err := api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID(tenant, fmt.Sprint(k)), Owner: "o"}); err != nil {
				t.Fatalf("claim %s/%d: %v", tenant, k, err)
			}
		}
		if _, err := api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID(tenant, "0"), Owner: "o"}); err != nil {
			t.Fatal(err)
		}
	}
	claims := gatherByTenant(t, reg, "idemnode_tenant_claims_total")
	keys := gatherByTenant(t, reg, "idemnode_tenant_stored_keys")
	if len(claims) != tenantTopN || len(keys) != tenantTopN {
		t.Fatalf("%d claims series and %d usage series, want %d of each: %v %v", len(claims), len(keys), tenantTopN, claims, keys)
	}
	for n := 5; n <= 14; n++ {
		tenant := fmt.Sprintf("t%02d", n)
		if claims[tenant] != float64(n+1) || keys[tenant] != float64(n) {
			t.Errorf("%s: %v claims and %v keys exported, want %d and %d", tenant, claims[tenant], keys[tenant], n+1, n)
		}
	}
	quota := gatherByTenant(t, reg, "idemnode_tenant_quota_keys")
	if quota[""] != 100 {
		t.Errorf("idemnode_tenant_quota_keys = %v, want 100", quota)
	}
}

// TestTenantUsageNeedsAQuota: without a quota no usage series exist (they
// would rank tenants by nothing), and the quotas read 0.
func TestTenantUsageNeedsAQuota(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := NewServer(mustNode(t), DefaultLimits(), nil, WithMetrics(NewMetrics(reg), reg))
	if _, err := s.Claim(testCtx(t), &idempb.ClaimRequest{Id: tenantID("a", "k"), Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	if got := gatherByTenant(t, reg, "idemnode_tenant_stored_keys"); len(got) != 0 {
		t.Errorf("usage exported without a quota: %v", got)
	}
	if got := gatherByTenant(t, reg, "idemnode_tenant_claims_total"); got["a"] != 1 {
		t.Errorf("claims by tenant %v, want a=1", got)
	}
	if got := gatherByTenant(t, reg, "idemnode_tenant_quota_keys"); got[""] != 0 {
		t.Errorf("quota %v, want 0", got)
	}
}

// TestTenantClaimsForgetIdleTenantsWhenFull: a flood of one-off tenants
// fills the count, and a tenant that starts claiming afterwards is counted
// once a scrape has seen the flood go idle.
func TestTenantClaimsForgetIdleTenantsWhenFull(t *testing.T) {
	c := &tenantClaims{counts: map[string]*atomic.Uint64{}}
	for i := range maxCountedTenants {
		c.inc(fmt.Sprint("flood-", i))
	}
	c.inc("flood-0") // still claiming: kept
	c.top(tenantTopN)
	c.inc("late")
	if _, ok := c.counts["late"]; ok {
		t.Fatal("counted a tenant past the bound")
	}
	c.inc("flood-0")
	c.top(tenantTopN) // the flood claimed nothing since the last scrape
	c.inc("late")
	if n := c.counts["late"]; n == nil || n.Load() != 1 {
		t.Fatalf("late tenant not counted after the idle ones were forgotten: %v", n)
	}
	if got := c.counts["flood-0"]; got == nil || got.Load() != 3 || len(c.counts) != 2 {
		t.Fatalf("kept %d tenants, flood-0 at %v; want the busy one and the late one", len(c.counts), got)
	}
}
