package proxy_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/proxy"
)

// webhookDefaultRoutes set neither store nor fingerprint on the webhook
// routes, but /hooks/keep404 and /hooks/strict, which say theirs.
const webhookDefaultRoutes = `
routes:
  - match: POST /hooks/github
    key: {header: X-GitHub-Delivery}
  - match: POST /hooks/stripe
    key: {json: /id}
  - match: POST /hooks/keep404
    key: {json: /id}
    store: [200-499]
  - match: POST /hooks/strict
    key: {json: /id}
    fingerprint: {body: canonical}
`

// TestProxyWebhookDefaults: on a route keyed by a sender's event id, the
// receiver's 404 ("order not known yet") is not stored, so the sender's
// retry reaches it again and the event is handled; attempts of one event
// whose bodies differ are one event. A route that says store or
// fingerprint keeps what it says: the 404 replayed, the other body 422.
func TestProxyWebhookDefaults(t *testing.T) {
	var ready atomic.Bool
	up := startGoUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "order not known yet", http.StatusNotFound)
			return
		}
		w.Write([]byte("handled"))
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url(), Routes: routes(t, webhookDefaultRoutes)})
	stripe := func(path, id string, pending int) reply {
		body := `{"id":"` + id + `","pending_webhooks":` + string(rune('0'+pending)) + `}`
		return send(t, "POST", base+path, "", body)
	}
	github, stripeID, keepID := client.NewKey(), "evt_"+client.NewKey(), "evt_"+client.NewKey()

	must(t, "github, first", githubDelivery(t, base, github, `{}`), 404)
	must(t, "stripe, first", stripe("/hooks/stripe", stripeID, 1), 404)
	must(t, "keep404, first", stripe("/hooks/keep404", keepID, 1), 404)
	ready.Store(true)
	hits := up.hits.Load()
	must(t, "github, the retry", githubDelivery(t, base, github, `{}`), 200)
	must(t, "stripe, the retry", stripe("/hooks/stripe", stripeID, 2), 200)
	if r := stripe("/hooks/keep404", keepID, 1); r.status != 404 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("keep404, the retry: HTTP %d %v %s, want the stored 404", r.status, r.header, r.body)
	}
	if n := up.hits.Load() - hits; n != 2 {
		t.Fatalf("the retries reached the receiver %d times, want 2 (github and stripe)", n)
	}

	// Stripe's pending_webhooks differs between attempts: one event.
	if r := stripe("/hooks/stripe", stripeID, 3); r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("stripe, another body: HTTP %d %v %s, want the replay", r.status, r.header, r.body)
	}
	strictID := "evt_" + client.NewKey()
	must(t, "strict, first", stripe("/hooks/strict", strictID, 1), 200)
	r := stripe("/hooks/strict", strictID, 2)
	if r.status != 422 || problemType(r) != idemhttp.ProblemKeyReused {
		t.Fatalf("strict, another body: HTTP %d %s, want 422", r.status, r.body)
	}
}
