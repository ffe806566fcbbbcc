package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// The headers a guarded request carries to the upstream: the claim it runs
// under (its fencing token and the record's id, which the JSON API's
// /v1/checkpoint takes to record a step), and, on a takeover, the recovery
// point to resume after. A client's own are removed, guarded or not.
const (
	HeaderToken        = "Idempotency-Token"
	HeaderRecordTenant = "Idempotency-Record-Tenant"
	HeaderRecordScope  = "Idempotency-Record-Scope"
	HeaderRecordKey    = "Idempotency-Record-Key"
	HeaderResumePoint  = "Idempotency-Resume-Point"
	// HeaderResumeData is the point's data in standard base64, sent when it
	// is at most MaxResumeDataHeader bytes; larger data is read with
	// /v1/get (the record's recovery_point).
	HeaderResumeData    = "Idempotency-Resume-Data"
	MaxResumeDataHeader = 4 << 10
)

// runHeaders are every header the proxy sets for the upstream.
var runHeaders = []string{HeaderToken, HeaderRecordTenant, HeaderRecordScope, HeaderRecordKey,
	HeaderResumePoint, HeaderResumeData}

// Config configures a proxy. Upstream and Client are required.
type Config struct {
	// Upstream is the service behind the proxy (http or https).
	Upstream *url.URL
	// Client reaches the idemnode cluster, with the proxy's credentials.
	Client *client.Client
	// Routes says what is guarded and how; nil is DefaultRoutes("").
	Routes *Routes
	// UpstreamTimeout bounds the wait for the upstream's response headers
	// (default 60s); a timeout is answered 504 and releases the key.
	UpstreamTimeout time.Duration
	// UpstreamBodyTimeout bounds the upstream's response body, from its
	// headers to its end (default 5m). Past it, or when the body breaks
	// off, a status the route stores keeps the key (the operation ran)
	// with the not-kept marker; see idemhttp.ResponseBroken.
	UpstreamBodyTimeout time.Duration
	// Metrics registers the proxy's metrics; nil registers none.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// New returns the proxy's handler.
func New(cfg Config) (http.Handler, error) {
	if cfg.Upstream == nil || cfg.Upstream.Host == "" || (cfg.Upstream.Scheme != "http" && cfg.Upstream.Scheme != "https") {
		return nil, errors.New("proxy: the upstream must be an http:// or https:// URL with a host")
	}
	if cfg.Client == nil {
		return nil, errors.New("proxy: Config.Client is nil")
	}
	if cfg.Routes == nil {
		cfg.Routes = DefaultRoutes("")
	}
	if err := cfg.Routes.check(); err != nil {
		return nil, err
	}
	if cfg.UpstreamTimeout <= 0 {
		cfg.UpstreamTimeout = 60 * time.Second
	}
	if cfg.UpstreamBodyTimeout <= 0 {
		cfg.UpstreamBodyTimeout = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("proxy metrics: %w", err)
	}
	upstream := upstreamHandler(cfg, m, cfg.Routes.endToEnd())
	mux := http.NewServeMux()
	mux.Handle("/", upstream)
	tenant := cfg.Routes.Tenant.tenantFunc()
	for i := range cfg.Routes.Routes {
		r := &cfg.Routes.Routes[i]
		h, err := guard(r, cfg, tenant, m, upstream)
		if err != nil {
			return nil, fmt.Errorf("routes[%d] (%s): %w", i, r.Match, err)
		}
		if err := handle(mux, r.method+" "+r.pattern, h); err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
	}
	return mux, nil
}

// guard wraps the upstream in idemhttp's middleware with the route's
// settings.
func guard(r *Route, cfg Config, tenant func(*http.Request) (string, error), m *metrics, upstream http.Handler) (http.Handler, error) {
	mw, err := idemhttp.New(idemhttp.Config{
		Client:            cfg.Client,
		Tenant:            tenant,
		Methods:           []string{r.method},
		KeyJSON:           r.keyField,
		KeyOptional:       r.Key.Mode == keyOptional,
		DeriveMissingKeys: r.Key.Mode == keyDerived,
		Fingerprint:       r.Fingerprint.fingerprintFunc(),
		Wait:              time.Duration(r.Wait),
		Lease:             time.Duration(r.Lease),
		TTL:               time.Duration(r.TTL),
		Store:             r.stores,
		MaxBody:           r.MaxRequestBytes,
		MaxStoredBody:     r.MaxResponseBytes,
		Logger:            cfg.Logger,
		Observe:           m.observe,
	})
	if err != nil {
		return nil, err
	}
	var opts []idemhttp.RouteOption
	if r.Key.Header != "" {
		// The sender's event id, read as sent, required whatever the
		// defaults say.
		opts = append(opts, idemhttp.KeyFromHeader(r.Key.Header))
	}
	return mw.Handler(upstream, opts...), nil
}

// handle registers a pattern, turning ServeMux's panic on a conflict into
// an error.
func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("match %q: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// upstreamHandler forwards a request to the upstream, with the fencing
// token of the claim it runs under (none when unguarded).
func upstreamHandler(cfg Config, m *metrics, endToEnd []string) http.Handler {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = cfg.UpstreamTimeout
	tr.MaxIdleConnsPerHost = 256
	rp := &httputil.ReverseProxy{
		// Rewrite runs after ReverseProxy removed the hop-by-hop headers,
		// those the caller names in Connection among them: what the proxy
		// adds or relies on is set here, on the outbound request, so no
		// caller can strip it.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(cfg.Upstream)
			pr.SetXForwarded()
			for _, h := range runHeaders {
				pr.Out.Header.Del(h)
			}
			if run, guarded := client.RunFrom(pr.In.Context()); guarded {
				for _, h := range endToEnd {
					if v, sent := pr.In.Header[h]; sent {
						pr.Out.Header[h] = v
					}
				}
				setRunHeaders(pr.Out.Header, run)
			}
		},
		Transport:      timedTransport{next: tr, m: m},
		ModifyResponse: gotHeaders,
		ErrorHandler:   upstreamError(cfg.Logger),
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, guarded := client.RunFrom(r.Context()); !guarded {
			m.requests.WithLabelValues(outcomePassthrough).Inc()
			rp.ServeHTTP(w, r)
			return
		}
		serveGuarded(rp, cfg, w, r)
	})
}

// setRunHeaders tells the upstream which claim it runs under, and where to
// resume on a takeover.
func setRunHeaders(h http.Header, run *client.Run) {
	id := run.ID()
	h.Set(HeaderToken, strconv.FormatUint(run.Token(), 10))
	h.Set(HeaderRecordTenant, id.Tenant)
	h.Set(HeaderRecordScope, id.Scope)
	h.Set(HeaderRecordKey, id.Key)
	if point, ok := run.Resume(); ok {
		h.Set(HeaderResumePoint, point.Name)
		if len(point.Data) <= MaxResumeDataHeader {
			h.Set(HeaderResumeData, base64.StdEncoding.EncodeToString(point.Data))
		}
	}
}

// upstreamError answers a request the upstream did not answer with a
// status: 504 when it timed out, 502 when it refused or broke the
// connection. Both release a guarded key, whatever the route stores, so
// the retry runs again. A body that breaks after the status is
// serveGuarded's.
func upstreamError(log *slog.Logger) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		// The upstream gave no answer, which no store list may keep: a
		// route that stores 5xx would replay this timeout forever.
		idemhttp.NotAnAnswer(w)
		status, title := http.StatusBadGateway, "Upstream failed"
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			status, title = http.StatusGatewayTimeout, "Upstream timed out"
		}
		if r.Context().Err() == nil {
			log.Warn("proxy: upstream failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		}
		body, _ := json.Marshal(map[string]any{"type": "https://idemnode.io/problems/upstream-failed", "title": title,
			"status": status, "detail": "The upstream did not answer; the request may be retried with the same key.",
			// It may have acted before failing: only the same key is safe.
			"safe_new_key": false})
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Link", idemhttp.LinkDescribedBy)
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}
