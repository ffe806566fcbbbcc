package proxy_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/proxy"
)

// hookSecret is the endpoint secret the senders sign with.
var hookSecret = []byte("whsec-proxy-test")

// webhookRoutes guard a GitHub receiver (the event id in a header) and a
// Stripe one (in the body), storing only the receiver's 2xx: a delivery
// it refuses, a forged one among them, leaves no record.
const webhookRoutes = `
routes:
  - match: POST /hooks/github
    key: {header: X-GitHub-Delivery}
    wait: 1m
    store: [200-299]
  - match: POST /hooks/stripe
    key: {json: /id}
    ttl: 96h
    wait: 1m
    store: [200-299]
`

// hookReceiver is the upstream: it checks each delivery's signature as
// GitHub and Stripe receivers do, and counts the events it handled. A
// handler holds until the gate is open.
type hookReceiver struct {
	mu      sync.Mutex
	handled map[string]int // "path id"
	gate    chan struct{}
	entered chan struct{}
}

func startHookReceiver(t *testing.T) (*hookReceiver, *goUpstream) {
	rc := &hookReceiver{handled: map[string]int{}, gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	close(rc.gate)
	return rc, startGoUpstream(t, rc.serve)
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id, ok := "", false
	switch r.URL.Path {
	case "/hooks/github":
		id = r.Header.Get("X-GitHub-Delivery")
		ok = hmac.Equal([]byte(r.Header.Get("X-Hub-Signature-256")), []byte(githubSignature(body)))
	case "/hooks/stripe":
		var ev struct{ ID string }
		_ = json.Unmarshal(body, &ev)
		ts, _, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Stripe-Signature"), "t="), ",")
		id, ok = ev.ID, hmac.Equal([]byte(r.Header.Get("Stripe-Signature")), []byte(stripeSignature(ts, body)))
	}
	if !ok {
		http.Error(w, "signature does not match", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	gate := rc.gate
	rc.mu.Unlock()
	rc.entered <- struct{}{}
	<-gate
	rc.mu.Lock()
	rc.handled[r.URL.Path+" "+id]++
	rc.mu.Unlock()
	fmt.Fprintf(w, "handled %s\n", id)
}

func (rc *hookReceiver) count(path, id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.handled[path+" "+id]
}

// hold closes the gate; the returned func opens it again, once.
func (rc *hookReceiver) hold() func() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.gate = make(chan struct{})
	return sync.OnceFunc(func() { close(rc.gate) })
}

func githubSignature(body []byte) string {
	m := hmac.New(sha256.New, hookSecret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// stripeSignature signs one attempt: its timestamp and the body.
func stripeSignature(ts string, body []byte) string {
	m := hmac.New(sha256.New, hookSecret)
	fmt.Fprintf(m, "%s.%s", ts, body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// githubDelivery sends one attempt of a GitHub event.
func githubDelivery(t testing.TB, base, delivery, body string) reply {
	return send(t, "POST", base+"/hooks/github", "", body,
		"X-GitHub-Delivery", delivery, "X-GitHub-Event", "push", "X-Hub-Signature-256", githubSignature([]byte(body)))
}

// stripeDelivery sends one attempt of a Stripe event: each attempt is
// signed with its own timestamp, as Stripe signs its retries.
func stripeDelivery(t testing.TB, base, body string, attempt int) reply {
	ts := strconv.FormatInt(time.Now().Unix()+int64(attempt), 10)
	return send(t, "POST", base+"/hooks/stripe", "", body, "Stripe-Signature", stripeSignature(ts, []byte(body)))
}

// redeliver sends n attempts of one event at once while the first holds
// the receiver, and returns the answers once the service holds
// duplicates of the key and the receiver is let go. Its callers do not
// run in parallel: the leader's count of keys with waiters is then theirs
// alone.
func redeliver(t *testing.T, rc *hookReceiver, n int, attempt func(i int) reply) []reply {
	t.Helper()
	release := rc.hold()
	defer release() // should the test fail while the receiver holds
	replies := make([]reply, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); replies[0] = attempt(0) }()
	<-rc.entered
	m := shared.WaitLeader(30 * time.Second).Node().Machine()
	base := m.Waiting()
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); replies[i] = attempt(i) }()
	}
	// Waiting counts keys with waiters: at least one duplicate is held.
	testutil.Eventually(t, 20*time.Second, "duplicates held on the leader", func() bool { return m.Waiting() > base })
	release()
	wg.Wait()
	for i, r := range replies {
		if r.status != 200 || r.body != replies[0].body {
			t.Errorf("attempt %d: HTTP %d %q, want 200 %q", i, r.status, r.body, replies[0].body)
		}
	}
	return replies
}

// TestProxyWebhookKeyFromHeader: a GitHub receiver behind the proxy
// handles each delivery once: 20 concurrent attempts and one after
// completion are one event; two deliveries with byte-identical bodies
// and different ids are two; a delivery without the id is a 400 naming
// the header, and the receiver never sees it.
func TestProxyWebhookKeyFromHeader(t *testing.T) {
	rc, up := startHookReceiver(t)
	base, reg := startProxyTo(t, shared, proxy.Config{Upstream: up.url(), Routes: routes(t, webhookRoutes)})
	body := `{"ref":"refs/heads/main","after":"5d2c9f"}`
	id := client.NewKey()

	redeliver(t, rc, 20, func(int) reply { return githubDelivery(t, base, id, body) })
	if late := githubDelivery(t, base, id, body); late.status != 200 || late.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a redelivery after completion: HTTP %d %v %q", late.status, late.header, late.body)
	}
	other := client.NewKey()
	if r := githubDelivery(t, base, other, body); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another delivery with the same body: HTTP %d %v %q, want it handled", r.status, r.header, r.body)
	}
	if a, b := rc.count("/hooks/github", id), rc.count("/hooks/github", other); a != 1 || b != 1 {
		t.Fatalf("handled %d and %d times, want once each", a, b)
	}

	hits := up.hits.Load()
	r := send(t, "POST", base+"/hooks/github", "", body, "X-Hub-Signature-256", githubSignature([]byte(body)))
	if r.status != 400 || problemType(r) != idemhttp.ProblemMissingKey || !strings.Contains(r.body, "X-GitHub-Delivery header is missing") ||
		r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("no delivery id: HTTP %d %v %s", r.status, r.header, r.body)
	}
	if up.hits.Load() != hits || requests(t, reg, "refused") != 1 {
		t.Fatalf("the refused delivery reached the receiver (%d hits) or was not counted refused", up.hits.Load()-hits)
	}
}

// TestProxyWebhookKeyFromJSON: a Stripe receiver behind the proxy,
// keyed by the event's /id, handles each event once though every attempt
// carries its own Stripe-Signature; a forged first delivery the receiver
// refuses does not block the real one; a body without /id, with an empty
// one or that is not JSON is a 400 naming /id, and the receiver never
// sees it.
func TestProxyWebhookKeyFromJSON(t *testing.T) {
	rc, up := startHookReceiver(t)
	base, reg := startProxyTo(t, shared, proxy.Config{Upstream: up.url(), Routes: routes(t, webhookRoutes)})
	id := "evt_" + client.NewKey()
	body := `{"id":"` + id + `","type":"payment_intent.succeeded","data":{"object":{"amount":2000}}}`

	// A forgery first: the receiver refuses its signature, the route
	// stores no 400, so the key is free again for the real event.
	forged := send(t, "POST", base+"/hooks/stripe", "", body, "Stripe-Signature", "t=1,v1=00")
	must(t, "a forged delivery", forged, 400)

	replies := redeliver(t, rc, 20, func(i int) reply { return stripeDelivery(t, base, body, i) })
	late := stripeDelivery(t, base, body, 99)
	if late.status != 200 || late.body != replies[0].body || late.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a redelivery after completion: HTTP %d %v %q", late.status, late.header, late.body)
	}
	if n := rc.count("/hooks/stripe", id); n != 1 {
		t.Fatalf("event %s handled %d times, want 1", id, n)
	}
	rec, err := newClient(t).Get(t.Context(), client.ID{Scope: "POST /hooks/stripe", Key: id})
	if err != nil || rec.ExpiresAt.Sub(rec.CreatedAt) != 96*time.Hour {
		t.Fatalf("the record of %s: %+v %v, want it kept for the route's 96h", id, rec, err)
	}

	hits, refused := up.hits.Load(), requests(t, reg, "refused")
	for _, tc := range []struct{ name, body, problem, says string }{
		{"no id", `{"type":"payment_intent.succeeded"}`, idemhttp.ProblemMissingKey, "Key field /id is missing"},
		{"an empty id", `{"id":"","type":"payment_intent.succeeded"}`, idemhttp.ProblemMissingKey, "Key field /id is missing"},
		{"not JSON", `id=evt_1&type=payment_intent.succeeded`, idemhttp.ProblemInvalidKey, "field /id, and the body is not one JSON value"},
	} {
		r := stripeDelivery(t, base, tc.body, 0)
		if r.status != 400 || problemType(r) != tc.problem || !strings.Contains(r.body, tc.says) ||
			r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: HTTP %d %s, want 400 %s saying %q", tc.name, r.status, r.body, tc.problem, tc.says)
		}
	}
	if up.hits.Load() != hits || requests(t, reg, "refused") != refused+3 {
		t.Fatalf("the refused deliveries reached the receiver (%d hits) or were not counted refused", up.hits.Load()-hits)
	}
}
