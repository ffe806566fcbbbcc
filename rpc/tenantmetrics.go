package rpc

import (
	"cmp"
	"fmt"
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
// for at most maxCountedTenants tenants; once that many are counted, each
// scrape forgets those that claimed nothing since the previous one, so a
// flood of one-off tenants cannot keep a tenant that starts claiming now
// out of the count. Claims not counted are in idemnode_claims_total.
const (
	tenantTopN        = 10
	maxCountedTenants = 10_000
)

// tenantClaims counts claims by tenant. The claim path takes the read
// lock only, except for a tenant's first claim.
type tenantClaims struct {
	mu     sync.RWMutex
	counts map[string]*atomic.Uint64
	// scraped is each count as the previous scrape saw it (top).
	scraped map[string]uint64
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

// top returns the n tenants with the most claims, most first, after
// forgetting idle tenants if the count is full.
func (c *tenantClaims) top(n int) []tenantValue {
	c.mu.Lock()
	defer c.mu.Unlock()
	full := len(c.counts) >= maxCountedTenants
	all := make([]tenantValue, 0, len(c.counts))
	scraped := make(map[string]uint64, len(c.counts))
	for tenant, count := range c.counts {
		v := count.Load()
		if prev, ok := c.scraped[tenant]; full && ok && prev == v {
			delete(c.counts, tenant) // idle since the last scrape
			continue
		}
		scraped[tenant] = v
		all = append(all, tenantValue{tenant, float64(v)})
	}
	c.scraped = scraped
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
		claims: prometheus.NewDesc("idemnode_tenant_claims_total", fmt.Sprintf(
			"Claims answered to clients of this node, for the %d tenants with the most since counting began.", tenantTopN), tenant, nil),
		storedKeys: prometheus.NewDesc("idemnode_tenant_stored_keys", fmt.Sprintf(
			"Records a tenant stores, for the %d tenants nearest their quota (only with a quota).", tenantTopN), tenant, nil),
		storedBytes: prometheus.NewDesc("idemnode_tenant_stored_bytes", fmt.Sprintf(
			"Bytes a tenant stores, for the %d tenants nearest their quota (only with a quota).", tenantTopN), tenant, nil),
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
	share  float64
}

// nearestQuota returns the n tenants that use the largest share of either
// quota, nearest first. It runs under the machine's read lock, which holds
// off applies: per tenant it only compares with the n kept so far.
func nearestQuota(m *fsm.Machine, q fsm.Quota, n int) []tenantUsage {
	share := func(used, limit uint64) float64 {
		if limit == 0 {
			return 0
		}
		return float64(used) / float64(limit)
	}
	// nearer orders by share, then name (so scrapes agree).
	nearer := func(a, b tenantUsage) int {
		return cmp.Or(cmp.Compare(b.share, a.share), cmp.Compare(a.tenant, b.tenant))
	}
	kept := make([]tenantUsage, 0, n)
	m.EachUsage(func(tenant string, u fsm.Usage) {
		t := tenantUsage{tenant, u, max(share(u.Keys, q.Keys), share(u.Bytes, q.Bytes))}
		if len(kept) < n {
			kept = append(kept, t)
			return
		}
		farthest := 0
		for i := range kept {
			if nearer(kept[i], kept[farthest]) > 0 {
				farthest = i
			}
		}
		if nearer(t, kept[farthest]) < 0 {
			kept[farthest] = t
		}
	})
	slices.SortFunc(kept, nearer)
	return kept
}
