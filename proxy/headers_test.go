package proxy_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/proxy"
)

// TestProxyConnectionHeaderCannotStripRunHeaders (finding 4): a caller's
// Connection header names hop-by-hop headers, which a proxy removes; it
// must not remove what the proxy adds or relies on. The first run records
// a step and fails (503: the key is released with its recovery point); the
// retry names every such header in Connection and the upstream still gets
// each one: the token, the record's id, the resume point and its data, the
// key, the tenant, the fingerprinted header and X-Forwarded-*.
func TestProxyConnectionHeaderCannotStripRunHeaders(t *testing.T) {
	t.Parallel()
	cl := newClient(t)
	seen := make(chan http.Header, 2)
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		if r.Header.Get(proxy.HeaderResumePoint) != "" {
			w.WriteHeader(http.StatusCreated)
			return
		}
		token, _ := strconv.ParseUint(r.Header.Get(proxy.HeaderToken), 10, 64)
		id := client.ID{Tenant: r.Header.Get(proxy.HeaderRecordTenant), Scope: r.Header.Get(proxy.HeaderRecordScope),
			Key: r.Header.Get(proxy.HeaderRecordKey)}
		if out, err := cl.Checkpoint(r.Context(), id, token, "charged", []byte("ch_1")); err != nil || out != client.OutcomeOK {
			t.Errorf("checkpoint %v with token %d: %v %v", id, token, out, err)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url(), Routes: routes(t, `
tenant: {header: X-Tenant}
routes: [{match: POST /charges, fingerprint: {headers: [X-Account]}}]
`)})
	key := client.NewKey()
	must(t, "first", send(t, "POST", base+"/charges", key, `{}`, "X-Tenant", "acme", "X-Account", "a1"), 503)
	<-seen
	names := []string{proxy.HeaderToken, proxy.HeaderRecordTenant, proxy.HeaderRecordScope, proxy.HeaderRecordKey,
		proxy.HeaderResumePoint, proxy.HeaderResumeData, "Idempotency-Key", "X-Tenant", "X-Account",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}
	must(t, "retry", send(t, "POST", base+"/charges", key, `{}`, "X-Tenant", "acme", "X-Account", "a1",
		"Connection", strings.Join(names, ", ")), 201)
	got := <-seen
	want := map[string]string{proxy.HeaderRecordTenant: "acme", proxy.HeaderRecordScope: "POST /charges",
		proxy.HeaderRecordKey: key, proxy.HeaderResumePoint: "charged", proxy.HeaderResumeData: "Y2hfMQ==",
		"Idempotency-Key": key, "X-Tenant": "acme", "X-Account": "a1"}
	for _, name := range names {
		if got.Get(name) == "" || (want[name] != "" && got.Get(name) != want[name]) {
			b, _ := json.Marshal(got)
			t.Errorf("the upstream got %s %q, want %q; it got %s", name, got.Get(name), want[name], b)
		}
	}
}
