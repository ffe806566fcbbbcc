package idemhttp_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testutil"
)

// webhookSecret signs the test deliveries, as a sender's endpoint secret.
var webhookSecret = []byte("whsec-test")

// receiver is a webhook handler that counts the events it handled by
// their id, after checking each delivery's Standard Webhooks signature
// (over id, timestamp and body): every attempt carries its own timestamp
// and signature, which the guard must neither need nor mind.
type receiver struct {
	mu      sync.Mutex
	handled map[string]int
	entered chan struct{} // a handler started
	gate    chan struct{} // closed: handlers may finish
}

func newReceiver() *receiver {
	gate := make(chan struct{})
	close(gate)
	return &receiver{handled: map[string]int{}, entered: make(chan struct{}, 100), gate: gate}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := r.Header.Get("Webhook-Id")
	if !hmac.Equal([]byte(r.Header.Get("Webhook-Signature")), []byte(sign(id, r.Header.Get("Webhook-Timestamp"), body))) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	rc.entered <- struct{}{}
	<-rc.gate
	rc.mu.Lock()
	rc.handled[id]++
	n := rc.handled[id]
	rc.mu.Unlock()
	fmt.Fprintf(w, "handled %s (time %d)", id, n)
}

func (rc *receiver) count(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.handled[id]
}

// sign is the Standard Webhooks v1 signature of one attempt.
func sign(id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, webhookSecret)
	fmt.Fprintf(m, "%s.%s.%s", id, timestamp, body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// deliver sends one attempt of event id with body, as the sender does:
// its own timestamp and signature, the event id in webhook-id.
func deliver(t testing.TB, url, id, body string, attempt int) reply {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix()+int64(attempt), 10)
	return request(t, "POST", url, "", body,
		"webhook-id", id, "webhook-timestamp", ts, "webhook-signature", sign(id, ts, []byte(body)))
}

// redeliverConcurrently sends n attempts of one event at once, while the
// first holds the handler, and returns every answer. The handler is held
// until the service holds duplicates of the key (it counts keys with
// waiters, not waiters): the others are sent at the same moment. Its
// callers do not run in parallel, so that count is theirs alone.
func redeliverConcurrently(t *testing.T, rc *receiver, n int, send func(attempt int) reply) []reply {
	t.Helper()
	gate := make(chan struct{})
	rc.gate = gate
	// Should the test fail while the handler is held, it must still
	// finish, or the server's Close waits for it forever.
	release := sync.OnceFunc(func() { close(gate) })
	defer release()
	replies := make([]reply, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); replies[0] = send(0) }()
	<-rc.entered
	heldOnLeader(t, 1, func() {
		for i := 1; i < n; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); replies[i] = send(i) }()
		}
	})
	release()
	wg.Wait()
	return replies
}

// sameAnswer checks that every reply is the first's 200.
func sameAnswer(t *testing.T, replies []reply) {
	t.Helper()
	for i, r := range replies {
		if r.status != 200 || r.body != replies[0].body {
			t.Errorf("attempt %d: HTTP %d %q, want 200 %q", i, r.status, r.body, replies[0].body)
		}
	}
}

// TestWebhookKeyFromHeader: a Standard Webhooks receiver keyed by the
// webhook-id header handles each event once: 20 concurrent attempts, each
// with its own timestamp and signature, and one after completion, are one
// event; two events with byte-identical bodies and different ids are two.
func TestWebhookKeyFromHeader(t *testing.T) {
	rc := newReceiver()
	srv := serve(t, idemhttp.Config{}, rc, idemhttp.KeyFromHeader("webhook-id"), idemhttp.WaitFor(time.Minute))
	body := `{"type":"invoice.paid","data":{"amount":100}}`
	id := "msg_" + client.NewKey()

	replies := redeliverConcurrently(t, rc, 20, func(i int) reply { return deliver(t, srv.URL, id, body, i) })
	sameAnswer(t, replies)
	late := deliver(t, srv.URL, id, body, 99)
	if late.status != 200 || late.body != replies[0].body || late.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a redelivery after completion: HTTP %d %v %q", late.status, late.header, late.body)
	}
	if n := rc.count(id); n != 1 {
		t.Fatalf("event %s handled %d times, want 1", id, n)
	}

	other := "msg_" + client.NewKey()
	if r := deliver(t, srv.URL, other, body, 0); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another event with the same body: HTTP %d %v %q, want it handled", r.status, r.header, r.body)
	}
	if rc.count(other) != 1 || rc.count(id) != 1 {
		t.Fatalf("handled %d and %d times, want once each", rc.count(id), rc.count(other))
	}

	// No id: refused, naming the header, the handler never runs.
	r := request(t, "POST", srv.URL, "", body)
	if p := decodeProblem(t, r); r.status != 400 || p.Type != idemhttp.ProblemMissingKey || p.Title != "webhook-id header is missing" {
		t.Fatalf("no webhook-id: HTTP %d %s", r.status, r.body)
	}
}

// TestWebhookKeyFromJSON: a receiver keyed by the body's /id (Stripe's
// event id) handles each event once, however the attempts are signed; a
// body without the field, with an empty one or that is not JSON is a 400
// naming /id, and nothing runs.
func TestWebhookKeyFromJSON(t *testing.T) {
	field, err := idemhttp.ParsePointer("/id")
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver()
	srv := serve(t, idemhttp.Config{KeyJSON: field, Wait: time.Minute}, rc)
	id := "evt_" + client.NewKey()
	body := `{"id":"` + id + `","type":"charge.succeeded","data":{"object":{"amount":100}}}`
	// The receiver checks Standard Webhooks headers; a Stripe sender's
	// would be Stripe-Signature. The key comes from the body either way.
	send := func(i int) reply { return deliver(t, srv.URL, id, body, i) }

	sameAnswer(t, redeliverConcurrently(t, rc, 20, send))
	if late := send(99); late.status != 200 || late.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a redelivery after completion: HTTP %d %v %q", late.status, late.header, late.body)
	}
	if n := rc.count(id); n != 1 {
		t.Fatalf("event %s handled %d times, want 1", id, n)
	}

	for _, tc := range []struct{ name, body, problem, title string }{
		{"no id", `{"type":"charge.succeeded"}`, idemhttp.ProblemMissingKey, "Key field /id is missing"},
		{"an empty id", `{"id":""}`, idemhttp.ProblemMissingKey, "Key field /id is missing"},
		{"an object id", `{"id":{}}`, idemhttp.ProblemInvalidKey, "Key field /id is malformed"},
		{"not JSON", `id=evt_1`, idemhttp.ProblemInvalidKey, "Request body is not JSON"},
	} {
		r := deliver(t, srv.URL, "msg_x", tc.body, 0)
		p := decodeProblem(t, r)
		if r.status != 400 || p.Type != tc.problem || p.Title != tc.title || !*p.SafeNewKey {
			t.Errorf("%s: HTTP %d %s, want 400 %s %q", tc.name, r.status, r.body, tc.problem, tc.title)
		}
	}
	if n := rc.count("msg_x"); n != 0 {
		t.Fatalf("the refused deliveries ran the handler %d times", n)
	}
}

// TestWebhookAfterTTL: docs/WEBHOOKS.md's "Retention". On a cluster that
// keeps tombstones, a redelivery after the event's TTL is 410 Gone and the
// handler does not run; on one that does not, it is a new event and runs
// again.
func TestWebhookAfterTTL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		tombstone time.Duration
		want      int // status of the late redelivery
		runs      int // how often the event ran in the end
	}{
		{"tombstones", time.Hour, http.StatusGone, 1},
		{"no tombstones", 0, http.StatusOK, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := shortTTLNode(t, tc.tombstone)
			rc := newReceiver()
			srv := serve(t, idemhttp.Config{Client: cl, TTL: 300 * time.Millisecond, Lease: 150 * time.Millisecond}, rc,
				idemhttp.KeyFromHeader("webhook-id"))
			id, body := "msg_"+client.NewKey(), `{"type":"invoice.paid"}`
			if r := deliver(t, srv.URL, id, body, 0); r.status != 200 {
				t.Fatalf("first delivery: HTTP %d %s", r.status, r.body)
			}
			// Redeliver until the answer is no longer the stored one: each
			// attempt before the TTL ends is a replay, which runs nothing.
			var late reply
			testutil.Eventually(t, 10*time.Second, "the record to expire", func() bool {
				late = deliver(t, srv.URL, id, body, 1)
				return late.header.Get("Idempotent-Replayed") != "true"
			})
			if late.status != tc.want || rc.count(id) != tc.runs {
				t.Fatalf("after the TTL: HTTP %d %s, handled %d times; want %d, %d times", late.status, late.body, rc.count(id), tc.want, tc.runs)
			}
			if tc.want == http.StatusGone && decodeProblem(t, late).Type != idemhttp.ProblemExpired {
				t.Fatalf("after the TTL: %s, want %s", late.body, idemhttp.ProblemExpired)
			}
		})
	}
}
