package rpc

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/fsm"
)

// Per-tenant series are bounded, so that a flood of tenants (with
// authentication off, every call names its own) cannot become a flood of
// series in Prometheus: only the tenantTopN tenants with the most claims,
// and the tenantTopN nearest their quota, are exported. Counts are kept
// for at most maxCountedTenants tenants; claims of tenants beyond that are
// in idemnode_claims_total only.
const (
	tenantTopN        = 10
	maxCountedTenants = 10_000
)

// tenantClaims counts claims by tenant. The claim path takes the read
// lock only, except for a tenant's first claim.
type tenantClaims struct {
	mu     sync.RWMutex
	counts map[string]*atomic.Uint64
}

func (c *tenantClaims) inc(tenant string) {
	c.mu.RLock()
	n, ok := c.counts[tenant]
	c.mu.RUnlock()
	if !ok {
		if n = c.add(tenant); n == nil {
			return
		}
	}
	n.Add(1)
}

// add makes tenant's counter, nil once maxCountedTenants are counted.
func (c *tenantClaims) add(tenant string) *atomic.Uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.counts[tenant]; ok {
		return n
	}
	if len(c.counts) >= maxCountedTenants {
		return nil
	}
	n := new(atomic.Uint64)
	c.counts[tenant] = n
	return n
}

// tenantValue is one tenant's value in a top-N ranking.
type tenantValue struct {
	tenant string
	value  float64
}

// top returns the n tenants with the most claims, most first.
func (c *tenantClaims) top(n int) []tenantValue {
	c.mu.RLock()
	all := make([]tenantValue, 0, len(c.counts))
	for tenant, count := range c.counts {
		all = append(all, tenantValue{tenant, float64(count.Load())})
	}
	c.mu.RUnlock()
	return topN(all, n)
}

// topN sorts by value, largest first (ties by name, so scrapes agree),
// and keeps the first n.
func topN(all []tenantValue, n int) []tenantValue {
	slices.SortFunc(all, func(a, b tenantValue) int {
		return cmp.Or(cmp.Compare(b.value, a.value), cmp.Compare(a.tenant, b.tenant))
	})
	return all[:min(n, len(all))]
}

// tenantCollector exports the per-tenant series at scrape time: claims
// of the busiest tenants, and the usage of the tenants nearest their
// quota (only when a quota is set).
type tenantCollector struct {
	s                               *Server
	claims, storedKeys, storedBytes *prometheus.Desc
	quotaKeys, quotaBytes           *prometheus.Desc
}

func newTenantCollector(s *Server) *tenantCollector {
	tenant := []string{"tenant"}
	return &tenantCollector{s: s,
		claims: prometheus.NewDesc("idemnode_tenant_claims_total",
			"Claims answered to clients of this node, for the 10 tenants with the most since the node started.", tenant, nil),
		storedKeys: prometheus.NewDesc("idemnode_tenant_stored_keys",
			"Records a tenant stores, for the 10 tenants nearest their quota (only with a quota).", tenant, nil),
		storedBytes: prometheus.NewDesc("idemnode_tenant_stored_bytes",
			"Bytes a tenant stores, for the 10 tenants nearest their quota (only with a quota).", tenant, nil),
		quotaKeys: prometheus.NewDesc("idemnode_tenant_quota_keys",
			"Each tenant's quota of stored records this node stamps into commands (0: none).", nil, nil),
		quotaBytes: prometheus.NewDesc("idemnode_tenant_quota_bytes",
			"Each tenant's quota of stored bytes this node stamps into commands (0: none).", nil, nil),
	}
}

func (c *tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.claims, c.storedKeys, c.storedBytes, c.quotaKeys, c.quotaBytes} {
		ch <- d
	}
}

func (c *tenantCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.s.tenantClaims.top(tenantTopN) {
		ch <- prometheus.MustNewConstMetric(c.claims, prometheus.CounterValue, t.value, t.tenant)
	}
	q := c.s.limits.quota()
	ch <- prometheus.MustNewConstMetric(c.quotaKeys, prometheus.GaugeValue, float64(q.Keys))
	ch <- prometheus.MustNewConstMetric(c.quotaBytes, prometheus.GaugeValue, float64(q.Bytes))
	if q.Keys == 0 && q.Bytes == 0 {
		return
	}
	for _, t := range nearestQuota(c.s.backend.Machine(), q, tenantTopN) {
		u := t.usage
		ch <- prometheus.MustNewConstMetric(c.storedKeys, prometheus.GaugeValue, float64(u.Keys), t.tenant)
		ch <- prometheus.MustNewConstMetric(c.storedBytes, prometheus.GaugeValue, float64(u.Bytes), t.tenant)
	}
}

// tenantUsage is a tenant's usage and the share of its quota it uses.
type tenantUsage struct {
	tenant string
	usage  fsm.Usage
}

// nearestQuota returns the n tenants that use the largest share of
// either quota.
func nearestQuota(m *fsm.Machine, q fsm.Quota, n int) []tenantUsage {
	share := func(used, limit uint64) float64 {
		if limit == 0 {
			return 0
		}
		return float64(used) / float64(limit)
	}
	var ranked []tenantValue
	usage := map[string]fsm.Usage{}
	m.EachUsage(func(tenant string, u fsm.Usage) {
		ranked = append(ranked, tenantValue{tenant, max(share(u.Keys, q.Keys), share(u.Bytes, q.Bytes))})
		usage[tenant] = u
	})
	var out []tenantUsage
	for _, t := range topN(ranked, n) {
		out = append(out, tenantUsage{t.tenant, usage[t.tenant]})
	}
	return out
}
