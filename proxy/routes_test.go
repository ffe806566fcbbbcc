package proxy

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
)

// TestParseRoutes: a routes file is decoded strictly and checked; every
// mistake names the route and the field.
func TestParseRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, err string
	}{
		{"an unknown field", "routes: [{match: POST /x, ttl: 1h, tll: 2h}]", `unknown field "tll"`},
		{"an unknown top-level field", "route: [{match: POST /x}]", `unknown field "route"`},
		{"no routes", "tenant: {header: X-Tenant}", "routes: none given"},
		{"no method", "routes: [{match: /x}]", `match: want "METHOD /path"`},
		{"a method in lower case", "routes: [{match: post /x}]", "with the method in capitals"},
		{"a relative path", "routes: [{match: POST x}]", "must start with /"},
		{"a bad key mode", "routes: [{match: POST /x, key: maybe}]", `key: "maybe"`},
		{"a lease too short", "routes: [{match: POST /x, lease: 10ms}]", "lease: 10ms"},
		{"a TTL too long", "routes: [{match: POST /x, ttl: 800h}]", "ttl: 800h0m0s"},
		{"a duration without a unit", "routes: [{match: POST /x, ttl: 3600}]", "a duration is a string"},
		{"a response limit past the service's", "routes: [{match: POST /x, max_response_bytes: 2000000}]", "max_response_bytes: 2000000"},
		{"a status out of range", "routes: [{match: POST /x, store: [200-299, 1000]}]", "store: 1000"},
		{"a reversed range", "routes: [{match: POST /x, store: [299-200]}]", "store: \"299-200\""},
		{"a bad fingerprint body", "routes: [{match: POST /x, fingerprint: {body: json}}]", `fingerprint.body: "json"`},
		{"a bad fingerprint header", "routes: [{match: POST /x, fingerprint: {headers: [\"a b\"]}}]", `"a b" is not a header name`},
		{"two tenant sources", "tenant: {header: X-Tenant, authorization_hash: true}\nroutes: [{match: POST /x}]", "not both"},
		{"a match in the defaults", "defaults: {match: POST /x}\nroutes: [{match: POST /x}]", "defaults.match"},
		{"a key from two places", "routes: [{match: POST /x, key: {header: X-Id, json: /id}}]", "give header or json, not both"},
		{"an empty key object", "routes: [{match: POST /x, key: {}}]", "both are empty"},
		{"an empty pointer", "routes: [{match: POST /x, key: {json: \"\"}}]", "both are empty"},
		{"a relative pointer", "routes: [{match: POST /x, key: {json: id}}]", `key.json: JSON Pointer "id" does not start with /`},
		{"a bad escape", "routes: [{match: POST /x, key: {json: /a~2}}]", "~ must be followed by 0 or 1"},
		{"a bad key header", "routes: [{match: POST /x, key: {header: \"X Id\"}}]", `key.header: "X Id" is not a header name`},
		{"an unknown key field", "routes: [{match: POST /x, key: {field: /id}}]", `unknown field "field"`},
		{"the route named in the error", "routes: [{match: POST /a}, {match: POST /b, key: no}]", "routes[1] (POST /b)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRoutes([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// TestRouteDefaults: a route takes the file's defaults, then the built-in
// ones; its own fields win.
func TestRouteDefaults(t *testing.T) {
	rs, err := ParseRoutes([]byte(`
defaults: {ttl: 48h, store: [200-299], fingerprint: {headers: [X-Account]}}
routes:
  - match: POST /a
  - match: PATCH /b/{id}
    ttl: 2h
    key: optional
    store: [200-499]
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := rs.Routes[0], rs.Routes[1]
	if time.Duration(a.TTL) != 48*time.Hour || time.Duration(a.Lease) != defaultLease || a.Key.Mode != keyRequired ||
		!a.stores(201) || a.stores(404) || a.Fingerprint.Body != bodyCanonical || len(a.Fingerprint.Headers) != 1 {
		t.Errorf("route a: %+v", a)
	}
	if time.Duration(b.TTL) != 2*time.Hour || b.Key.Mode != keyOptional || !b.stores(404) || b.stores(500) || b.method != "PATCH" || b.pattern != "/b/{id}" {
		t.Errorf("route b: %+v", b)
	}
	if d := DefaultRoutes(""); d.check() != nil || !d.Routes[0].stores(499) || d.Routes[0].stores(500) {
		t.Errorf("default routes: %+v", d)
	}
}

// TestConflictingRoutes: two routes that match the same requests with the
// same precedence are refused when the proxy starts, naming the route.
func TestConflictingRoutes(t *testing.T) {
	cl, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs, err := ParseRoutes([]byte("routes: [{match: \"POST /a/{id}\"}, {match: \"POST /a/{name}\"}]"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, Client: cl, Routes: rs})
	if err == nil || !strings.Contains(err.Error(), "routes[1]") || !strings.Contains(err.Error(), "conflicts") {
		t.Fatalf("error %v, want routes[1] conflicting", err)
	}
}

// TestWebhookKeyRoutes: a key from a header or a JSON body field is read
// from the routes file beside the mode strings, inherited from the
// defaults, and the key's header reaches the upstream as the proxy read it.
func TestWebhookKeyRoutes(t *testing.T) {
	rs, err := ParseRoutes([]byte(`
defaults: {key: {json: /data/object/id}}
routes:
  - match: POST /hooks/github
    key: {header: X-GitHub-Delivery}
  - match: POST /hooks/stripe
  - match: POST /charges
    key: derived
`))
	if err != nil {
		t.Fatal(err)
	}
	gh, stripe, charges := rs.Routes[0], rs.Routes[1], rs.Routes[2]
	if gh.Key.Header != "X-GitHub-Delivery" || !gh.keyField.IsZero() {
		t.Errorf("github route: key %+v, field %q", gh.Key, gh.keyField)
	}
	if stripe.Key.JSON != "/data/object/id" || stripe.keyField.String() != "/data/object/id" {
		t.Errorf("stripe route: key %+v, field %q", stripe.Key, stripe.keyField)
	}
	if charges.Key.Mode != keyDerived || charges.Key.Header != "" || !charges.keyField.IsZero() {
		t.Errorf("charges route: key %+v", charges.Key)
	}
	if e2e := rs.endToEnd(); !slices.Contains(e2e, "X-Github-Delivery") {
		t.Errorf("end-to-end headers %q lack the key's header", e2e)
	}
}
