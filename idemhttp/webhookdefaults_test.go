package idemhttp_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// notYet answers 404 ("order not known yet") until ready is set, then 200;
// it counts the deliveries that reached it.
type notYet struct {
	ready atomic.Bool
	runs  atomic.Int32
}

func (h *notYet) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.runs.Add(1)
	if !h.ready.Load() {
		http.Error(w, "order not known yet", http.StatusNotFound)
		return
	}
	w.Write([]byte("handled"))
}

func mustPointer(t *testing.T, s string) idemhttp.Pointer {
	t.Helper()
	p, err := idemhttp.ParsePointer(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWebhookStoresOnly2xx: on a route keyed by a sender's event id, a 4xx
// is not stored, so the sender's retry runs the handler again and the
// event is handled once the receiver can; an explicit Config.Store still
// wins, and then the 404 is what every retry gets.
func TestWebhookStoresOnly2xx(t *testing.T) {
	byHeader := idemhttp.KeyFromHeader("webhook-id")
	byField := idemhttp.KeyFromJSON(mustPointer(t, "/id"))
	below500 := func(status int) bool { return status < 500 }
	for _, tc := range []struct {
		name  string
		cfg   idemhttp.Config
		route idemhttp.RouteOption
		want  int // the retry's status once the receiver is ready
	}{
		{"header", idemhttp.Config{}, byHeader, http.StatusOK},
		{"json", idemhttp.Config{}, byField, http.StatusOK},
		{"explicit store", idemhttp.Config{Store: below500}, byHeader, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &notYet{}
			srv := serve(t, tc.cfg, h, tc.route)
			id := "evt_" + client.NewKey()
			body := `{"id":"` + id + `"}`
			if r := deliver(t, srv.URL, id, body, 0); r.status != http.StatusNotFound {
				t.Fatalf("first delivery: HTTP %d %s, want 404", r.status, r.body)
			}
			h.ready.Store(true)
			r := deliver(t, srv.URL, id, body, 1)
			if r.status != tc.want {
				t.Fatalf("the retry: HTTP %d %s, want %d", r.status, r.body, tc.want)
			}
			wantRuns := int32(2)
			if tc.want == http.StatusNotFound {
				wantRuns = 1 // the stored 404 is replayed
			}
			if n := h.runs.Load(); n != wantRuns {
				t.Fatalf("the handler ran %d times, want %d", n, wantRuns)
			}
		})
	}
}

// TestWebhookBodyMayDiffer: attempts of one event whose bodies differ (a
// sender's delivery counter) are one event by default; with the body in
// the fingerprint (Config.Fingerprint) the second is a 422 that speaks of
// the event id, not of an Idempotency-Key the sender never sent.
func TestWebhookBodyMayDiffer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   idemhttp.Config
		route idemhttp.RouteOption
		want  int
	}{
		{"header", idemhttp.Config{}, idemhttp.KeyFromHeader("webhook-id"), http.StatusOK},
		{"json", idemhttp.Config{}, idemhttp.KeyFromJSON(mustPointer(t, "/id")), http.StatusOK},
		{"body fingerprint", idemhttp.Config{Fingerprint: idemhttp.Fingerprint}, idemhttp.KeyFromJSON(mustPointer(t, "/id")),
			http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver()
			srv := serve(t, tc.cfg, rc, tc.route)
			id := "evt_" + client.NewKey()
			body := func(n int) string { return `{"id":"` + id + `","pending_webhooks":` + string(rune('0'+n)) + `}` }
			first := deliver(t, srv.URL, id, body(1), 0)
			if first.status != http.StatusOK {
				t.Fatalf("first delivery: HTTP %d %s", first.status, first.body)
			}
			r := deliver(t, srv.URL, id, body(2), 1)
			if r.status != tc.want || rc.count(id) != 1 {
				t.Fatalf("a retry with another body: HTTP %d %s, handled %d times; want %d, once", r.status, r.body, rc.count(id), tc.want)
			}
			if tc.want == http.StatusOK {
				if r.body != first.body || r.header.Get("Idempotent-Replayed") != "true" {
					t.Fatalf("a retry with another body: %v %q, want the replay of %q", r.header, r.body, first.body)
				}
				return
			}
			p := decodeProblem(t, r)
			if p.Type != idemhttp.ProblemKeyReused || p.Title != "Event id reused" || !strings.Contains(p.Detail, "/id") ||
				strings.Contains(p.Detail, "new key") {
				t.Fatalf("the 422: %s", r.body)
			}
		})
	}
}

// TestWebhookHeaderAlwaysRequired: a sender's header is required even where
// the Config lets callers send no Idempotency-Key: without it the request
// is a 400 that does not ask for a UUID, and the handler never runs.
func TestWebhookHeaderAlwaysRequired(t *testing.T) {
	for _, cfg := range []idemhttp.Config{{KeyOptional: true}, {DeriveMissingKeys: true}} {
		h := &notYet{}
		srv := serve(t, cfg, h, idemhttp.KeyFromHeader("X-GitHub-Delivery"))
		r := request(t, "POST", srv.URL, "", `{"action":"opened"}`)
		p := decodeProblem(t, r)
		if r.status != http.StatusBadRequest || p.Type != idemhttp.ProblemMissingKey || strings.Contains(p.Detail, "UUID") {
			t.Fatalf("optional %v, derive %v: HTTP %d %s, want 400 missing key", cfg.KeyOptional, cfg.DeriveMissingKeys, r.status, r.body)
		}
		if n := h.runs.Load(); n != 0 {
			t.Fatalf("the handler ran %d times", n)
		}
	}
}

// TestWebhookHeaderAsSent: a sender's event id is the header's value byte
// for byte, as the receiver reads it: "q1" in quotes and q1 are two events,
// where an Idempotency-Key's quotes are Structured Field syntax.
func TestWebhookHeaderAsSent(t *testing.T) {
	rc := newReceiver()
	srv := serve(t, idemhttp.Config{}, rc, idemhttp.KeyFromHeader("webhook-id"))
	id := "msg_" + client.NewKey()
	for _, v := range []string{`"` + id + `"`, id} {
		if r := deliver(t, srv.URL, v, `{}`, 0); r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("event %s: HTTP %d %v %s, want it handled", v, r.status, r.header, r.body)
		}
	}
	if rc.count(id) != 1 || rc.count(`"`+id+`"`) != 1 {
		t.Fatalf("handled %d and %d times, want once each", rc.count(id), rc.count(`"`+id+`"`))
	}
}

// TestServerRefusesLongKey: a key the middleware accepts (MaxKeyLength 400)
// but the service refuses (over its 255 bytes) is a 400 naming the key,
// not a 503 "retry with the same key" that a sender would retry for days.
// A path over the service's scope limit is a 400 too.
func TestServerRefusesLongKey(t *testing.T) {
	h := &notYet{}
	srv := serve(t, idemhttp.Config{MaxKeyLength: 400}, h, idemhttp.KeyFromHeader("webhook-id"))
	r := deliver(t, srv.URL, strings.Repeat("k", 300), `{}`, 0)
	p := decodeProblem(t, r)
	if r.status != http.StatusBadRequest || p.Type != idemhttp.ProblemInvalidKey || !strings.Contains(p.Detail, "webhook-id") {
		t.Fatalf("HTTP %d %s, want 400 naming webhook-id", r.status, r.body)
	}
	if n := h.runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}

	// A path longer than the service's scope limit is refused the same
	// way, as the request it is, not the key.
	plain := serve(t, idemhttp.Config{}, h)
	r = request(t, "POST", plain.URL+"/"+strings.Repeat("p", 5000), client.NewKey(), `{}`)
	if p := decodeProblem(t, r); r.status != http.StatusBadRequest || p.Title != "Request refused" || !strings.Contains(p.Detail, "scope") {
		t.Fatalf("a long path: HTTP %d %s, want 400 naming the scope", r.status, r.body)
	}
	if n := h.runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestRouteOptionMisuse: a route option that names no key panics in
// Handler, as http.ServeMux does for a bad pattern, instead of guarding
// the route with Idempotency-Key or a header nobody sends; a Config.Header
// that is no header name is New's error, as its other config errors are.
func TestRouteOptionMisuse(t *testing.T) {
	m, err := idemhttp.New(idemhttp.Config{Client: newClient(t), Tenant: idemhttp.BearerTenant})
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]idemhttp.RouteOption{
		"KeyFromJSON(Pointer{})": idemhttp.KeyFromJSON(idemhttp.Pointer{}),
		`KeyFromHeader("")`:      idemhttp.KeyFromHeader(""),
		`KeyFromHeader("a b")`:   idemhttp.KeyFromHeader("a b"),
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(error).Error(), "idemhttp: KeyFrom") {
					t.Errorf("%s: Handler recovered %v, want a panic naming the option", name, p)
				}
			}()
			m.Handler(http.NotFoundHandler(), opt)
		}()
	}
	if _, err := idemhttp.New(idemhttp.Config{Client: newClient(t), Tenant: idemhttp.BearerTenant, Header: "Idempotency Key"}); err == nil ||
		!strings.Contains(err.Error(), "Config.Header") {
		t.Errorf("New with Header %q: %v, want an error naming Config.Header", "Idempotency Key", err)
	}
}
