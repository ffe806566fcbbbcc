package proxy_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/proxy"
)

// TestProxyAnswers: the answers of docs/PROXY.md in front of a Python
// upstream, with the default routes (every POST and PATCH guarded, the key
// required): a missing or malformed key 400, the first request runs with
// its fencing token, a retry is a byte-identical replay, another body with
// the key 422, a duplicate of a request in flight 409 with Retry-After.
func TestProxyAnswers(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	base, reg := startProxy(t, shared, up, routes(t, `
routes:
  - match: POST /charges
    wait: 200ms
  - match: PATCH /
`))
	must(t, "no key", send(t, "POST", base+"/charges", "", `{"amount":100}`), 400)
	if r := send(t, "POST", base+"/charges", "", `{}`); problemType(r) != idemhttp.ProblemMissingKey {
		t.Errorf("no key: problem %s", r.body)
	}
	if r := send(t, "POST", base+"/charges", strings.Repeat("k", 300), `{}`); r.status != 400 || problemType(r) != idemhttp.ProblemInvalidKey {
		t.Errorf("malformed key: HTTP %d %s", r.status, r.body)
	}

	key := client.NewKey()
	first := send(t, "POST", base+"/charges", key, `{"amount": 100, "currency": "EUR"}`)
	must(t, "first", first, 201)
	var ran struct {
		Key   string
		Count int
		Token string
	}
	if err := json.Unmarshal([]byte(first.body), &ran); err != nil || ran.Key != key || ran.Count != 1 {
		t.Fatalf("first: %s", first.body)
	}
	rec, err := newClient(t).Get(t.Context(), client.ID{Scope: "POST /charges", Key: key})
	if err != nil || strconv.FormatUint(rec.Token, 10) != ran.Token {
		t.Fatalf("the upstream saw token %q, the record holds %v (%v)", ran.Token, rec, err)
	}
	// The same request, keys reordered (canonical JSON): a replay.
	replay := send(t, "POST", base+"/charges", key, `{"currency":"EUR","amount":100}`)
	must(t, "replay", replay, 201)
	if replay.body != first.body || replay.header.Get("Idempotent-Replayed") != "true" ||
		replay.header.Get("Content-Type") != first.header.Get("Content-Type") {
		t.Fatalf("replay: %v %s, want %s replayed", replay.header, replay.body, first.body)
	}
	other := send(t, "POST", base+"/charges", key, `{"amount": 999}`)
	if other.status != 422 || problemType(other) != idemhttp.ProblemKeyReused {
		t.Fatalf("another body: HTTP %d %s", other.status, other.body)
	}
	if r := send(t, "POST", base+"/charges?to=b", key, `{"amount": 100, "currency": "EUR"}`); r.status != 422 {
		t.Fatalf("another query: HTTP %d %s, want 422", r.status, r.body)
	}

	slow := client.NewKey()
	done := make(chan reply, 1)
	go func() { done <- send(t, "POST", base+"/charges?sleep=1.5", slow, `{}`) }()
	waitRuns(t, up, slow, 1)
	dup := send(t, "POST", base+"/charges?sleep=1.5", slow, `{}`)
	if dup.status != 409 || dup.header.Get("Retry-After") == "" || problemType(dup) != idemhttp.ProblemInFlight {
		t.Fatalf("duplicate in flight: HTTP %d %v %s", dup.status, dup.header, dup.body)
	}
	must(t, "the slow request", <-done, 201)
	if n := up.runs(slow); n != 1 || up.runs(key) != 1 {
		t.Fatalf("runs: slow %d, first %d; want 1 each", n, up.runs(key))
	}
	// GET passes through unguarded.
	must(t, "GET", send(t, "GET", base+"/count?key="+key, "", ""), 200)

	for outcome, want := range map[string]float64{"executed": 2, "replayed": 1, "mismatch": 2, "conflict": 1, "refused": 3, "passthrough": 1} {
		if got := requests(t, reg, outcome); got != want {
			t.Errorf("idemnode_proxy_requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}

// TestProxyHundredAtOnce: 100 identical requests at once run the upstream
// once; every one gets its answer.
func TestProxyHundredAtOnce(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	base, _ := startProxy(t, shared, up, routes(t, "routes: [{match: POST /charges, wait: 20s}]"))
	key := client.NewKey()
	var wg sync.WaitGroup
	replies := make([]reply, 100)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = send(t, "POST", base+"/charges?sleep=0.3", key, `{"amount":1}`)
		}()
	}
	wg.Wait()
	for i, r := range replies {
		if r.status != 201 || r.body != replies[0].body {
			t.Fatalf("request %d: HTTP %d %s, want 201 %s", i, r.status, r.body, replies[0].body)
		}
	}
	if n := up.runs(key); n != 1 {
		t.Fatalf("the upstream ran %d times for 100 identical requests, want 1", n)
	}
}

// TestProxyTransientFailureReleases: an upstream 5xx is sent and releases
// the key, so the retry runs again; a route whose store list holds it
// stores it instead.
func TestProxyTransientFailureReleases(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	releasing, _ := startProxy(t, shared, up, nil)
	storing, _ := startProxy(t, shared, up, routes(t, "routes: [{match: POST /fail, store: [200-599]}]"))
	key := client.NewKey()
	must(t, "first", send(t, "POST", releasing+"/fail", key, `{}`), 503)
	must(t, "retry", send(t, "POST", releasing+"/fail", key, `{}`), 503)
	if n := up.runs(key); n != 2 {
		t.Fatalf("a released key ran %d times over two requests, want 2", n)
	}
	stored := client.NewKey()
	must(t, "first, stored", send(t, "POST", storing+"/fail", stored, `{}`), 503)
	if r := send(t, "POST", storing+"/fail", stored, `{}`); r.status != 503 || r.header.Get("Idempotent-Replayed") != "true" || up.runs(stored) != 1 {
		t.Fatalf("retry of a stored 503: HTTP %d %v after %d runs, want the replay after 1", r.status, r.header, up.runs(stored))
	}
}

// TestProxyResponseTooLarge: a response over max_response_bytes reaches
// the caller whole; a retry is told the operation ran, and the upstream
// runs once.
func TestProxyResponseTooLarge(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	base, _ := startProxy(t, shared, up, routes(t, "routes: [{match: POST /big, max_response_bytes: 1024}]"))
	key := client.NewKey()
	first := send(t, "POST", base+"/big?bytes=5000", key, `{}`)
	if first.status != 200 || len(first.body) != 5000 {
		t.Fatalf("first: HTTP %d, %d bytes", first.status, len(first.body))
	}
	retry := send(t, "POST", base+"/big?bytes=5000", key, `{}`)
	if retry.status != 200 || retry.header.Get(idemhttp.HeaderNotKept) != "true" || problemType(retry) != idemhttp.ProblemResponseNotKept {
		t.Fatalf("retry: HTTP %d %v %s", retry.status, retry.header, retry.body)
	}
	if n := up.runs(key); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
}

// TestProxyTenantHeader: the tenant comes from the header the gateway
// sets; two tenants with the same key are two operations; without the
// header the request is refused.
func TestProxyTenantHeader(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	base, _ := startProxy(t, shared, up, routes(t, `
tenant: {header: X-Tenant}
routes: [{match: POST /charges}]
`))
	key := client.NewKey()
	a := send(t, "POST", base+"/charges", key, `{}`, "X-Tenant", "acme")
	b := send(t, "POST", base+"/charges", key, `{}`, "X-Tenant", "globex")
	must(t, "acme", a, 201)
	must(t, "globex", b, 201)
	if !strings.Contains(b.body, `"count": 2`) || send(t, "POST", base+"/charges", key, `{}`, "X-Tenant", "acme").body != a.body {
		t.Fatalf("acme %s, globex %s: want two runs, and acme's replayed", a.body, b.body)
	}
	must(t, "no tenant", send(t, "POST", base+"/charges", client.NewKey(), `{}`), 401)
	must(t, "a tenant with a space", send(t, "POST", base+"/charges", client.NewKey(), `{}`, "X-Tenant", "a b"), 401)
}

func newClient(t testing.TB) *client.Client {
	t.Helper()
	cfg := client.Config{}
	for _, nd := range shared.Nodes {
		cfg.Addrs = append(cfg.Addrs, nd.GRPCAddr())
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// requests is idemnode_proxy_requests_total{outcome}.
func requests(t testing.TB, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "idemnode_proxy_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no idemnode_proxy_requests_total{outcome=%q}", outcome)
	return 0
}

// waitRuns waits until key ran n times on up.
func waitRuns(t testing.TB, up *upstream, key string, n int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, fmt.Sprintf("%s to run %d times", key, n), func() error {
		if runs := up.runs(key); runs < n {
			return fmt.Errorf("%s ran %d times", key, runs)
		}
		return nil
	})
}

// TestProxyTenantHeaderFlag: without a routes file, --tenant-header
// (DefaultRoutes) guards every POST and PATCH with the tenant from that
// header, and refuses a request without a key.
func TestProxyTenantHeaderFlag(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	base, _ := startProxy(t, shared, up, proxy.DefaultRoutes("X-Tenant"))
	key := client.NewKey()
	must(t, "acme", send(t, "POST", base+"/charges", key, `{}`, "X-Tenant", "acme"), 201)
	must(t, "globex", send(t, "POST", base+"/charges", key, `{}`, "X-Tenant", "globex"), 201)
	must(t, "no key", send(t, "POST", base+"/charges", "", `{}`, "X-Tenant", "acme"), 400)
	must(t, "no tenant", send(t, "POST", base+"/charges", client.NewKey(), `{}`), 401)
	if _, err := newClient(t).Get(t.Context(), client.ID{Tenant: "globex", Scope: "POST /charges", Key: key}); err != nil {
		t.Fatalf("globex's record: %v", err)
	}
	if n := up.runs(key); n != 2 {
		t.Fatalf("two tenants' requests ran %d times, want 2", n)
	}
}

// TestProxyResumesAfterUpstreamDiesBetweenSteps: an upstream in another
// language charges, records the step through the JSON API with the claim
// the proxy passed it, and dies before answering (502: the key is
// released, which with a recovery point ends the lease). The retry reaches
// it with the point to resume after: one charge, and the receipt's answer
// stored and replayed.
func TestProxyResumesAfterUpstreamDiesBetweenSteps(t *testing.T) {
	t.Parallel()
	up := startUpstreamWith(t, shared.Nodes[0].JSONURL())
	base, _ := startProxy(t, shared, up, nil)
	key := client.NewKey()
	// A caller's own copies of the run headers never reach the upstream: a
	// forged resume point would skip the charge.
	died := send(t, "POST", base+"/rides", key, `{"from":"A"}`, "X-Crash", "1",
		"Idempotency-Resume-Point", "charged", "Idempotency-Resume-Data", "Zm9yZ2Vk", "Idempotency-Token", "1",
		"Idempotency-Record-Key", "someone-else")
	must(t, "dies between the steps", died, 502)
	if !strings.Contains(died.body, `"safe_new_key":false`) || died.header.Get("Link") != idemhttp.LinkDescribedBy {
		t.Errorf("502: %v %s, want safe_new_key false and the describedby link", died.header, died.body)
	}
	r := send(t, "POST", base+"/rides", key, `{"from":"A"}`, "Idempotency-Resume-Point", "forged")
	must(t, "retry", r, 201)
	var ride struct {
		Charge, Resumed string
		Charges         int
	}
	if err := json.Unmarshal([]byte(r.body), &ride); err != nil {
		t.Fatalf("retry answered %q: %v", r.body, err)
	}
	if ride.Resumed != "charged" || ride.Charge != "ch_1" || ride.Charges != 1 {
		t.Fatalf("retry: %+v, want it resumed after the one charge", ride)
	}
	again := send(t, "POST", base+"/rides", key, `{"from":"A"}`)
	if again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || again.body != r.body {
		t.Fatalf("third request: HTTP %d %v %q, want the stored answer replayed", again.status, again.header, again.body)
	}
}
