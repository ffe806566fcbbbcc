package idemhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
)

// Config configures the middleware. Client and Tenant are required.
type Config struct {
	// Client reaches the idemnode cluster.
	Client *client.Client
	// Tenant names the owner of the request's keys, typically the
	// authenticated principal. It must not read the request body. An error
	// is answered 401.
	Tenant func(*http.Request) (string, error)

	// Methods the middleware applies to (default POST and PATCH); other
	// requests pass through untouched.
	Methods []string
	// Header is the request header carrying the caller's key (default
	// "Idempotency-Key"), read with the Idempotency-Key rules. A webhook
	// receiver takes its sender's event id header with KeyFromHeader
	// instead, which reads it as sent and applies the webhook defaults.
	Header string
	// KeyJSON, when set, takes the key from this field of the JSON body
	// instead of a header, e.g. /id for Stripe's event id, with the webhook
	// defaults (see KeyFromJSON). Routes override it with KeyFromHeader
	// and KeyFromJSON.
	KeyJSON Pointer
	// KeyOptional lets requests without a key through without the
	// guarantee (default: they are refused with 400). Routes override it
	// with KeyRequired.
	KeyOptional bool
	// DeriveMissingKeys derives a key for requests that send none, from
	// tenant, method, path and canonical body (see the package
	// documentation for why this is weaker). Routes override it.
	DeriveMissingKeys bool
	// MaxKeyLength bounds the key (default 255, the server's limit).
	MaxKeyLength int

	// Scope names the operation family of a request (default
	// "METHOD /path"); the same key under two scopes is two records.
	Scope func(*http.Request) string
	// Fingerprint identifies the request (default Fingerprint, and
	// FingerprintWithoutBody on routes keyed by a sender's event id). body
	// is the whole request body.
	Fingerprint func(r *http.Request, body []byte) []byte

	// Wait is how long a duplicate of a request in flight waits for it
	// before the 409 (default 5s). Routes override it with WaitFor.
	Wait time.Duration
	// RetryAfter is the Retry-After of 409 and 503 answers, and of 429
	// answers that carry no hint from the server (default 1s).
	RetryAfter time.Duration
	// Lease and TTL of the claims (default: the client's).
	Lease time.Duration
	TTL   time.Duration
	// Store reports whether a response with this status is stored and
	// replayed (default: below 500, and 200-299 on routes keyed by a
	// sender's event id); others release the key.
	Store func(status int) bool

	// MaxBody bounds the request body read for the fingerprint (default
	// 1 MiB); a larger body is answered 413.
	MaxBody int64
	// MaxStoredBody is the largest response body stored (default 1 MiB,
	// the server's limit), and the most a request holds in memory. A
	// larger response streams to the caller once it outgrows it, and what
	// is stored in its place is a marker: every retry is answered with the
	// same status, Idempotent-Response-Not-Kept: true and a problem body
	// (ProblemResponseNotKept) saying the operation ran. The handler never
	// runs twice for a response it could not store.
	MaxStoredBody int

	// Observe, when set, is told how each request guarded by the
	// middleware was answered (for metrics).
	Observe func(r *http.Request, o Outcome)

	// Logger receives what cannot be answered (a response that could not
	// be stored); nil is slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Client == nil {
		return c, errors.New("idemhttp: Config.Client is nil")
	}
	if c.Tenant == nil {
		return c, errors.New("idemhttp: Config.Tenant is nil")
	}
	if len(c.Methods) == 0 {
		c.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if c.Header == "" {
		c.Header = "Idempotency-Key"
	}
	if c.Header != "" && !httpguts.ValidHeaderFieldName(c.Header) {
		return c, fmt.Errorf("idemhttp: Config.Header %q is not a header name", c.Header)
	}
	if c.MaxKeyLength <= 0 {
		c.MaxKeyLength = 255
	}
	if c.Scope == nil {
		c.Scope = func(r *http.Request) string { return r.Method + " " + r.URL.Path }
	}
	if c.Wait <= 0 {
		c.Wait = 5 * time.Second
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = time.Second
	}
	if c.MaxBody <= 0 {
		c.MaxBody = 1 << 20
	}
	if c.MaxStoredBody <= 0 {
		c.MaxStoredBody = maxServiceBody
	}
	if c.MaxStoredBody > maxServiceBody {
		// The service would refuse to store such a body, and Do would then
		// release the key: the handler would run again on the retry.
		return c, fmt.Errorf("idemhttp: Config.MaxStoredBody %d is over the %d bytes the service stores", c.MaxStoredBody, maxServiceBody)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Middleware wraps handlers with the Idempotency-Key guarantee.
type Middleware struct {
	cfg Config
}

// New returns the middleware of cfg.
func New(cfg Config) (*Middleware, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Middleware{cfg: cfg}, nil
}

// RouteOption overrides the Config for one wrapped handler.
type RouteOption func(*route)

type route struct {
	required, derive bool
	wait             time.Duration
	header           string  // the key's header, when field is zero
	field            Pointer // the key's field in a JSON body
	// sender: the key is a webhook sender's event id (KeyFromHeader,
	// KeyFromJSON, Config.KeyJSON), not a key the caller made up.
	sender      bool
	store       func(status int) bool
	fingerprint func(r *http.Request, body []byte) []byte
	err         error // a route option's misuse, raised by Handler
}

// KeyRequired sets whether requests to this route must carry a key.
func KeyRequired(required bool) RouteOption { return func(r *route) { r.required = required } }

// DeriveMissingKeys sets whether requests to this route without a key get
// a derived one (see the package documentation).
func DeriveMissingKeys(derive bool) RouteOption { return func(r *route) { r.derive = derive } }

// WaitFor sets how long a duplicate waits for the request in flight.
func WaitFor(d time.Duration) RouteOption { return func(r *route) { r.wait = d } }

// KeyFromHeader takes this route's key from the named header, a webhook
// sender's event id (X-GitHub-Delivery, webhook-id), with the webhook
// defaults: the value is the key as sent (no quotes or whitespace
// removed; 1 to MaxKeyLength bytes of printable ASCII), a request without
// it is refused with 400 whatever KeyOptional and DeriveMissingKeys say,
// only 2xx answers are stored unless Config.Store says otherwise, and the
// default fingerprint leaves the body out (FingerprintWithoutBody). An
// invalid header name makes Handler panic.
func KeyFromHeader(name string) RouteOption {
	return func(r *route) {
		r.header, r.field, r.sender, r.err = name, Pointer{}, true, nil
		if !httpguts.ValidHeaderFieldName(name) {
			r.err = fmt.Errorf("idemhttp: KeyFromHeader(%q): not a header name", name)
		}
	}
}

// KeyFromJSON takes this route's key from a field of the JSON body, e.g.
// /id for Stripe's event id, with the webhook defaults of KeyFromHeader.
// A request whose body is not JSON, or whose field is absent, null, "",
// ambiguous or not a string or an integer, is refused with 400 naming the
// field. The zero Pointer makes Handler panic: build it with ParsePointer.
func KeyFromJSON(field Pointer) RouteOption {
	return func(r *route) {
		r.field, r.sender, r.err = field, true, nil
		if field.IsZero() {
			r.err = errors.New("idemhttp: KeyFromJSON: the Pointer is zero; build it with ParsePointer")
		}
	}
}

// Handler returns next wrapped with the guarantee. It panics when a route
// option is misused (KeyFromJSON of the zero Pointer, KeyFromHeader of no
// header name), as http.ServeMux does for a bad pattern: the route is the
// program's, and would otherwise guard nothing it was meant to.
func (m *Middleware) Handler(next http.Handler, opts ...RouteOption) http.Handler {
	rt := route{required: !m.cfg.KeyOptional, derive: m.cfg.DeriveMissingKeys, wait: m.cfg.Wait,
		header: m.cfg.Header, field: m.cfg.KeyJSON, sender: !m.cfg.KeyJSON.IsZero()}
	for _, o := range opts {
		o(&rt)
	}
	if rt.err != nil {
		panic(rt.err)
	}
	rt.store, rt.fingerprint = m.cfg.Store, m.cfg.Fingerprint
	if rt.sender {
		// A sender retries until it gets a 2xx, for days: a 4xx stored
		// under its event id (an order not known yet, a forged delivery
		// refused) would answer every retry, and the event would be lost.
		// Its signature vouches for the body, which may differ between
		// attempts of one event (Stripe's pending_webhooks).
		rt.required, rt.derive = true, false
		if rt.store == nil {
			rt.store = func(status int) bool { return status >= 200 && status < 300 }
		}
		if rt.fingerprint == nil {
			rt.fingerprint = FingerprintWithoutBody
		}
	}
	if rt.store == nil {
		rt.store = func(status int) bool { return status < 500 }
	}
	if rt.fingerprint == nil {
		rt.fingerprint = Fingerprint
	}
	return &handler{m: m, next: next, route: rt}
}

type handler struct {
	m     *Middleware
	next  http.Handler
	route route
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg := &h.m.cfg
	if !slices.Contains(cfg.Methods, r.Method) {
		h.next.ServeHTTP(w, r)
		return
	}
	fromBody := !h.route.field.IsZero()
	var key string
	derive := false
	if !fromBody {
		var err error
		read := parseKey
		if h.route.sender {
			read = senderKey
		}
		key, err = read(r.Header.Values(h.route.header), cfg.MaxKeyLength)
		switch {
		case errors.Is(err, errMissingKey) && h.route.derive:
			derive = true
		case errors.Is(err, errMissingKey) && h.route.required:
			h.refuse(w, r, missingHeader(h.route.header, h.route.sender))
			return
		case errors.Is(err, errMissingKey):
			h.next.ServeHTTP(w, r)
			return
		case err != nil:
			h.refuse(w, r, malformedHeader(h.route.header, h.route.sender, err, cfg.MaxKeyLength))
			return
		}
	}
	tenant, err := cfg.Tenant(r)
	if err != nil {
		h.observe(r, OutcomeRefused)
		writeProblem(w, unknownRun(http.StatusUnauthorized, ProblemNoTenant, "Unauthenticated",
			err.Error()), 0)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.observe(r, OutcomeRefused)
			writeProblem(w, notRun(http.StatusRequestEntityTooLarge, ProblemTooLarge, "Request body too large",
				fmt.Sprintf("The body exceeds %d bytes.", cfg.MaxBody)), 0)
			return
		}
		h.observe(r, OutcomeRefused)
		writeProblem(w, notRun(http.StatusBadRequest, problemBase+"request-body-unreadable", "Request body unreadable",
			err.Error()), 0)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if fromBody {
		// Nothing is claimed for a body that names no key: the problem
		// names the field the sender must fill.
		if key, err = fieldKey(body, h.route.field, cfg.MaxKeyLength); err != nil {
			h.refuse(w, r, badKeyField(h.route.field, err, cfg.MaxKeyLength))
			return
		}
	}
	if derive {
		sum := sha256.Sum256(CanonicalBody(r.Header.Get("Content-Type"), body))
		key = client.DeriveKey("idemhttp/derived/v1", tenant, r.Method, r.URL.Path, hex.EncodeToString(sum[:]))
	}
	id := client.ID{Tenant: tenant, Scope: cfg.Scope(r), Key: key}
	h.serve(w, r, id, h.route.fingerprint(r, body))
}

// serve runs the handler under the key, or answers from the record.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, id client.ID, fingerprint []byte) {
	a := &attempt{}
	res, err := h.run(w, r, id, fingerprint, a)
	h.answer(w, r, id, a, res, err)
}

// run runs the handler under the key with Do. What Do stores is the
// handler's response, or the not-kept marker when it does not fit or
// broke off after its status.
func (h *handler) run(w http.ResponseWriter, r *http.Request, id client.ID, fingerprint []byte, a *attempt) (client.Result, error) {
	cfg := &h.m.cfg
	classify := func(resp client.Response, err error) client.Action {
		if a.release {
			return client.Release
		}
		return h.classify(resp, err)
	}
	opts := []client.Option{client.WithWait(h.route.wait), client.WithClassifier(classify)}
	if cfg.Lease > 0 {
		opts = append(opts, client.WithLease(cfg.Lease))
	}
	if cfg.TTL > 0 {
		opts = append(opts, client.WithTTL(cfg.TTL))
	}
	d := newDetach(r.Context())
	defer d.close()
	return cfg.Client.Do(d.ctx, id, fingerprint, func(ctx context.Context) (resp client.Response, _ error) {
		hctx, cancel := d.start(ctx)
		defer cancel()
		a.rec = newRecorder(w, cfg.MaxStoredBody)
		if hctx == nil {
			// The caller left between the claim and the handler: nothing
			// ran, and nobody waits for an answer.
			a.release = true
			return client.Response{}, nil
		}
		defer func() {
			// A panic before a status that is stored propagates through
			// Do, which releases the key first; net/http then aborts the
			// connection, and the retry runs again. After one, the
			// operation ran: the key is completed, and the panic raised
			// again after that (answer).
			if a.rec.status == 0 || !h.route.store(a.rec.status) || a.rec.notAnswer {
				return
			}
			if p := recover(); p != nil {
				a.panicked = p
				resp = h.keep(id, a, fmt.Errorf("the handler panicked: %v", p))
			}
		}()
		h.next.ServeHTTP(a.rec, r.WithContext(hctx))
		return h.keep(id, a, a.rec.broken), nil
	}, opts...)
}

// answer sends what run produced: the handler's response, the stored one,
// or the problem that kept the handler from running.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, id client.ID, a *attempt, res client.Result, err error) {
	cfg := &h.m.cfg
	switch {
	case res.Executed:
		outcome := executedOutcome(res.Action)
		if err != nil {
			cfg.Logger.Error("idemhttp: the response was sent but not recorded; a retry may run the handler again",
				"tenant", id.Tenant, "scope", id.Scope, "key", id.Key, "err", err)
			outcome = OutcomeUnrecorded
		}
		h.observe(r, outcome)
		deliver(w, a, err == nil && res.Action == client.Complete)
	case err == nil:
		h.observe(r, OutcomeReplayed)
		writeReplay(w, res.Response, res.CompletedAt)
	case errors.Is(err, client.ErrMismatch):
		h.observe(r, OutcomeMismatch)
		writeProblem(w, h.reused(), 0)
	case errors.Is(err, client.ErrExpired):
		h.observe(r, OutcomeExpired)
		writeProblem(w, expired(err, h.route.sender), 0)
	case errors.Is(err, client.ErrInProgress), errors.Is(err, client.ErrTooManyWaits):
		h.observe(r, OutcomeConflict)
		writeProblem(w, inFlight(err), cfg.RetryAfter)
	case errors.Is(err, client.ErrRateLimited), errors.Is(err, client.ErrQuotaExceeded):
		h.observe(r, OutcomeLimited)
		h.refuseOverLimit(w, err)
	case status.Code(err) == codes.InvalidArgument:
		// The service refused the record's id: a key longer than its
		// limit, which may be below MaxKeyLength, or a scope (a path) or
		// tenant over its limits. A retry gets the same refusal, so it is
		// a 400, not a 503 that a webhook sender would retry for days.
		h.observe(r, OutcomeRefused)
		msg := status.Convert(err).Message()
		if !refusedKey(err) {
			cfg.Logger.Warn("idemhttp: the idempotency service refused the request's record id",
				"tenant", id.Tenant, "scope", id.Scope, "key", id.Key, "err", err)
			writeProblem(w, notRun(http.StatusBadRequest, problemBase+"request-refused", "Request refused",
				"The request was not processed: the idempotency service refused it: "+msg+"."), 0)
			return
		}
		writeProblem(w, notRun(http.StatusBadRequest, ProblemInvalidKey, "Key refused",
			fmt.Sprintf("The request was not processed: the idempotency service refused %s: %s.", h.route.keySource(), msg)), 0)
	case refusedCredentials(err):
		h.observe(r, OutcomeUnavailable)
		cfg.Logger.Error("idemhttp: the idempotency service refused the middleware's credentials; "+
			"check Config.Client's token or certificate and that Config.Tenant names its tenant",
			"code", status.Code(err).String(), "tenant", id.Tenant, "scope", id.Scope, "key", id.Key, "err", err)
		writeProblem(w, unknownRun(http.StatusInternalServerError, ProblemMisconfigured, "Idempotency service misconfigured",
			"The request was not processed: this server cannot use its idempotency service."), 0)
	default:
		h.observe(r, OutcomeUnavailable)
		if r.Context().Err() == nil {
			cfg.Logger.Error("idemhttp: idempotency service unavailable", "tenant", id.Tenant, "scope", id.Scope, "key", id.Key, "err", err)
		}
		writeProblem(w, unknownRun(http.StatusServiceUnavailable, ProblemUnavailable, "Idempotency service unavailable",
			"The request was not processed; retry it with the same key."), cfg.RetryAfter)
	}
}

// reused is the 422 answer: the key's record is another request's.
func (h *handler) reused() problem {
	title, detail := "Idempotency-Key reused",
		"This key was already used with a different request; use a new key for a new operation."
	if h.route.sender {
		title, detail = "Event id reused",
			"This endpoint already received "+h.route.keySource()+" with a different request: an event id names one event."
	}
	p := notRun(http.StatusUnprocessableEntity, ProblemKeyReused, title, detail)
	p.OperationState = StateMismatch // and nothing more: the record is another request's
	return p
}

// expired is the 410 answer: the operation ran under the key, or may have,
// before the key's TTL ended, and the service kept only its tombstone. A
// webhook sender cannot choose a new key, so it is told nothing of one.
func expired(err error, sender bool) problem {
	title, notAgainShort, notAgain := "Idempotency-Key expired", " Do not send it again with a new key.",
		" Do not send it again with a new key: look its result up instead."
	if sender {
		title, notAgain = "Event id expired", " It is not processed again under this event id."
		notAgainShort = notAgain
	}
	p := problem{Type: ProblemExpired, Title: title, Status: http.StatusGone,
		OperationState: StateExpired}
	var gone *client.ExpiredError
	if !errors.As(err, &gone) {
		p.Detail = "This operation ran, or may have, and its record expired: its response is gone." + notAgainShort
		return p
	}
	p.KeyExpiresAt = timeString(gone.ExpiresAt)
	// Two times, each with its own verb: when the operation completed (if
	// it did), and when its record expired.
	expiredAt := "its record expired"
	if p.KeyExpiresAt != "" {
		expiredAt += " at " + p.KeyExpiresAt
	}
	ran := "may have run: it was still in progress when " + expiredAt + ", and"
	if !gone.CompletedAt.IsZero() {
		ran = fmt.Sprintf("ran and completed at %s; %s and", timeString(gone.CompletedAt), expiredAt)
	}
	p.Detail = "This operation " + ran + " its response is gone." + notAgain
	return p
}

// inFlight is the 409 answer: the operation runs under the key elsewhere,
// so a new key could run it twice. A wait refused for the server's cap
// (TOO_MANY_WAITS) knows no more of the record.
func inFlight(err error) problem {
	p := problem{Type: ProblemInFlight, Title: "Request in flight", Status: http.StatusConflict,
		Detail:         "A request with this key is still being processed; retry after the Retry-After delay.",
		OperationState: StateInProgress}
	var held *client.InProgressError
	if errors.As(err, &held) {
		p.KeyExpiresAt = timeString(held.ExpiresAt)
	}
	return p
}

// refuseOverLimit answers a claim the service refused because the tenant
// is over its claim rate or its quota: 429, with the server's retry hint
// as Retry-After (Config.RetryAfter without one). The handler did not run
// and nothing was stored, so the retry is safe with the same key.
func (h *handler) refuseOverLimit(w http.ResponseWriter, err error) {
	after, ok := client.RetryAfter(err)
	if !ok || after <= 0 {
		after = h.m.cfg.RetryAfter
	}
	if errors.Is(err, client.ErrRateLimited) {
		writeProblem(w, unknownRun(http.StatusTooManyRequests, ProblemRateLimited, "Too many requests",
			"The request was not processed: this tenant sends requests faster than its rate allows; retry it with the same key after the Retry-After delay."), after)
		return
	}
	writeProblem(w, unknownRun(http.StatusTooManyRequests, ProblemQuotaExceeded, "Quota exceeded",
		"The request was not processed: this tenant stores as many idempotency records as its quota allows; retry it with the same key after the Retry-After delay."), after)
}

// refusedKey reports whether the service refused the record's key, the
// field its BadRequest names.
func refusedKey(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == "id.key" {
					return true
				}
			}
		}
	}
	return false
}

// refusedCredentials reports whether the service refused the client's
// credentials (Unauthenticated) or the tenant they were used for
// (PermissionDenied): the middleware is misconfigured, not the caller.
func refusedCredentials(err error) bool {
	code := status.Code(err)
	return code == codes.Unauthenticated || code == codes.PermissionDenied
}

// classify stores the statuses Config.Store accepts and that fit.
func (h *handler) classify(resp client.Response, err error) client.Action {
	cfg := &h.m.cfg
	if err != nil || !h.route.store(resp.Status) || len(resp.Body) > cfg.MaxStoredBody {
		return client.Release
	}
	return client.Complete
}

// BearerTenant is a Tenant function for demos and tests: the tenant is the
// bearer token of the Authorization header, as is. Real services take it
// from their verified authentication instead.
func BearerTenant(r *http.Request) (string, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "", errors.New("missing Authorization: Bearer <tenant>")
	}
	return strings.TrimSpace(token), nil
}
