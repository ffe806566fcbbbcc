package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"sigs.k8s.io/yaml"

	"github.com/idemnode/idemnode/idemhttp"
)

// Routes is the routes file: where the tenant comes from, the defaults of
// every route, and the routes, matched as Go's http.ServeMux matches
// patterns (the most specific wins; "{id}" matches one path segment,
// "{rest...}" the rest, a trailing "/" a whole subtree). Requests that
// match no route pass through unguarded.
type Routes struct {
	Tenant   Tenant  `json:"tenant"`
	Defaults Route   `json:"defaults"`
	Routes   []Route `json:"routes"`
}

// Tenant says where a request's tenant comes from. At most one is set;
// none means one tenant for every caller: the proxy's own (its credential
// decides it on a cluster with --auth).
type Tenant struct {
	// Header names a header the trusted gateway in front sets (X-Tenant).
	Header string `json:"header"`
	// AuthorizationHash makes the tenant a hash of the caller's
	// Authorization header: callers with the same credential share keys,
	// others never see them. The proxy does not check the credential.
	AuthorizationHash bool `json:"authorization_hash"`
}

// Route is one guarded method and path pattern. Unset fields take the
// file's defaults, then the built-in ones.
type Route struct {
	// Match is "METHOD pattern", e.g. "POST /v1/charges" or
	// "PATCH /v1/orders/{id}".
	Match string `json:"match"`
	// Key says where the key comes from (see Key).
	Key Key `json:"key"`
	// Lease of the claim while the upstream runs (extended as it runs),
	// TTL of the record, and how long a duplicate waits for the request in
	// flight before its 409.
	Lease Duration `json:"lease"`
	TTL   Duration `json:"ttl"`
	Wait  Duration `json:"wait"`
	// Store lists the upstream statuses that are stored and replayed, as
	// statuses and ranges ("200-299", 409); every other status releases
	// the key. Default: every status below 500, and 200-299 when the key
	// is a webhook sender's event id ({header: …} or {json: …}).
	Store StatusSet `json:"store"`
	// MaxRequestBytes bounds the request body (413 beyond); MaxResponseBytes
	// the stored response body (a larger one is sent, and a not-kept marker
	// stored). Defaults: 1 MiB, the service's limit.
	MaxRequestBytes  int64 `json:"max_request_bytes"`
	MaxResponseBytes int   `json:"max_response_bytes"`
	// Fingerprint says what makes two requests with the same key the same
	// request (another one is answered 422).
	Fingerprint Fingerprint `json:"fingerprint"`

	method, pattern string
	keyField        idemhttp.Pointer // Key.JSON, parsed
}

// Fingerprint is what a request's fingerprint covers beside its method and
// path.
type Fingerprint struct {
	// Body is canonical (JSON bodies parsed and re-serialised with sorted
	// keys, other bodies byte for byte; the default), bytes (every body
	// byte for byte) or none (the default when the key is a webhook
	// sender's event id).
	Body string `json:"body"`
	// Headers are request headers whose values count too.
	Headers []string `json:"headers"`
}

// Built-in defaults.
const (
	defaultLease    = 30 * time.Second
	defaultTTL      = 24 * time.Hour
	defaultWait     = 5 * time.Second
	maxServiceBody  = 1 << 20 // the service's limit on a stored body
	defaultMaxBody  = 1 << 20
	keyRequired     = "required"
	keyOptional     = "optional"
	keyDerived      = "derived"
	bodyCanonical   = "canonical"
	bodyBytes       = "bytes"
	bodyNone        = "none"
	maxRoutePattern = 1024
)

// DefaultRoutes guards every POST and PATCH with a required key, one
// tenant for all callers unless tenantHeader names the header carrying it.
func DefaultRoutes(tenantHeader string) *Routes {
	return &Routes{Tenant: Tenant{Header: tenantHeader},
		Routes: []Route{{Match: "POST /"}, {Match: "PATCH /"}}}
}

// LoadRoutes reads and checks a routes file.
func LoadRoutes(path string) (*Routes, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("routes file: %w", err)
	}
	rs, err := ParseRoutes(b)
	if err != nil {
		return nil, fmt.Errorf("routes file %s: %w", path, err)
	}
	return rs, nil
}

// ParseRoutes decodes a routes file (YAML or JSON), refusing unknown
// fields, and checks it.
func ParseRoutes(b []byte) (*Routes, error) {
	var rs Routes
	if err := yaml.UnmarshalStrict(b, &rs); err != nil {
		return nil, err
	}
	if err := rs.check(); err != nil {
		return nil, err
	}
	return &rs, nil
}

// check validates the file and fills every route's fields from the
// defaults.
func (rs *Routes) check() error {
	if rs.Tenant.Header != "" && rs.Tenant.AuthorizationHash {
		return errors.New("tenant: set header or authorization_hash, not both")
	}
	if h := rs.Tenant.Header; h != "" && !validHeaderName(h) {
		return fmt.Errorf("tenant.header: %q is not a header name", h)
	}
	if len(rs.Routes) == 0 {
		return errors.New("routes: none given (without a routes file every POST and PATCH is guarded)")
	}
	if rs.Defaults.Match != "" {
		return errors.New("defaults.match: the defaults match nothing; give match in each route")
	}
	for i := range rs.Routes {
		r := &rs.Routes[i]
		r.inherit(rs.Defaults)
		if err := r.check(); err != nil {
			return fmt.Errorf("routes[%d] (%s): %w", i, r.Match, err)
		}
	}
	return nil
}

// inherit fills r's unset fields from d, then from the built-in defaults.
func (r *Route) inherit(d Route) {
	r.Key = firstNonZero(r.Key, d.Key, Key{Mode: keyRequired})
	r.Lease = firstNonZero(r.Lease, d.Lease, Duration(defaultLease))
	r.TTL = firstNonZero(r.TTL, d.TTL, Duration(defaultTTL))
	r.Wait = firstNonZero(r.Wait, d.Wait, Duration(defaultWait))
	if r.Store == nil {
		r.Store = d.Store
	}
	r.MaxRequestBytes = firstNonZero(r.MaxRequestBytes, d.MaxRequestBytes, defaultMaxBody)
	r.MaxResponseBytes = firstNonZero(r.MaxResponseBytes, d.MaxResponseBytes, maxServiceBody)
	// A webhook sender's signature vouches for the body, and attempts of
	// one event may differ in it (Stripe's pending_webhooks): the event id
	// alone says which event it is.
	body := bodyCanonical
	if r.Key.sender() {
		body = bodyNone
	}
	r.Fingerprint.Body = firstNonZero(r.Fingerprint.Body, d.Fingerprint.Body, body)
	if r.Fingerprint.Headers == nil {
		r.Fingerprint.Headers = d.Fingerprint.Headers
	}
}

func (r *Route) check() error {
	method, pattern, ok := strings.Cut(r.Match, " ")
	pattern = strings.TrimSpace(pattern)
	switch {
	case !ok || method == "" || !validHeaderName(method) || strings.ToUpper(method) != method:
		return errors.New(`match: want "METHOD /path" with the method in capitals, e.g. "POST /v1/charges"`)
	case !strings.HasPrefix(pattern, "/") || len(pattern) > maxRoutePattern:
		return fmt.Errorf("match: the path %q must start with / (at most %d bytes)", pattern, maxRoutePattern)
	case r.Lease < Duration(time.Second) || r.Lease > Duration(time.Hour):
		return fmt.Errorf("lease: %s, want 1s to 1h (the service's limits)", time.Duration(r.Lease))
	case r.TTL < Duration(time.Minute) || r.TTL > Duration(30*24*time.Hour):
		return fmt.Errorf("ttl: %s, want 1m to 720h (the service's limits)", time.Duration(r.TTL))
	case r.Wait < 0 || r.Wait > Duration(10*time.Minute):
		return fmt.Errorf("wait: %s, want 0 to 10m", time.Duration(r.Wait))
	case r.MaxRequestBytes < 0:
		return fmt.Errorf("max_request_bytes: %d, want a positive size", r.MaxRequestBytes)
	case r.MaxResponseBytes < 0 || r.MaxResponseBytes > maxServiceBody:
		return fmt.Errorf("max_response_bytes: %d, want 1 to %d (the service stores no more)", r.MaxResponseBytes, maxServiceBody)
	case r.Fingerprint.Body != bodyCanonical && r.Fingerprint.Body != bodyBytes && r.Fingerprint.Body != bodyNone:
		return fmt.Errorf("fingerprint.body: %q, want canonical, bytes or none", r.Fingerprint.Body)
	}
	for _, h := range r.Fingerprint.Headers {
		if !validHeaderName(h) {
			return fmt.Errorf("fingerprint.headers: %q is not a header name", h)
		}
	}
	field, err := r.Key.check()
	if err != nil {
		return err
	}
	r.method, r.pattern, r.keyField = method, pattern, field
	return nil
}

// endToEnd are the request headers a guarded request's key, tenant and
// fingerprint come from: the upstream must get them as the proxy read
// them, even when the caller names them in Connection (a hop-by-hop
// header, which the proxy would otherwise remove), so that it acts on the
// request the record is for.
func (rs *Routes) endToEnd() []string {
	names := []string{"Idempotency-Key", "Content-Type"}
	if rs.Tenant.Header != "" {
		names = append(names, rs.Tenant.Header)
	}
	if rs.Tenant.AuthorizationHash {
		names = append(names, "Authorization")
	}
	for _, r := range rs.Routes {
		names = append(names, r.Fingerprint.Headers...)
		if r.Key.Header != "" {
			names = append(names, r.Key.Header)
		}
	}
	for i, n := range names {
		names[i] = http.CanonicalHeaderKey(n)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// stores reports whether an upstream status is stored. A webhook sender
// retries until it gets a 2xx: a 4xx stored under its event id (an order
// the receiver does not know yet, a forged delivery refused) would answer
// every retry, and the event would be lost.
func (r *Route) stores(status int) bool {
	switch {
	case r.Store != nil:
		return r.Store.Contains(status)
	case r.Key.sender():
		return status >= 200 && status < 300
	}
	return status < 500
}

// Duration is a time.Duration written as "30s" or "24h".
type Duration time.Duration

// UnmarshalJSON reads a duration string ("30s"); a bare number has no unit
// and is refused.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// StatusSet is a list of HTTP statuses and ranges: [200-299, 409].
type StatusSet [][2]int

// UnmarshalJSON reads statuses (409) and ranges ("200-299"), each within
// 100-999.
func (s *StatusSet) UnmarshalJSON(b []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return fmt.Errorf("store: a list of statuses and ranges such as [200-299, 409], got %s", b)
	}
	out := StatusSet{}
	for _, it := range items {
		text := strings.Trim(string(it), `"`)
		lo, hi, isRange := strings.Cut(text, "-")
		if !isRange {
			hi = lo
		}
		from, err1 := strconv.Atoi(strings.TrimSpace(lo))
		to, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || from < 100 || to > 999 || from > to {
			return fmt.Errorf("store: %s is not a status (100-999) or a range of them", it)
		}
		out = append(out, [2]int{from, to})
	}
	*s = out
	return nil
}

// Contains reports whether status is in the set.
func (s StatusSet) Contains(status int) bool {
	for _, r := range s {
		if status >= r[0] && status <= r[1] {
			return true
		}
	}
	return false
}

func firstNonZero[T comparable](vs ...T) T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return v
		}
	}
	return zero
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 tchar), as a
// header name and a method must be.
func validHeaderName(s string) bool { return httpguts.ValidHeaderFieldName(s) }
