package proxy

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/idemhttp"
)

// metrics are the proxy's own: requests by how they were answered, and the
// upstream's latency.
type metrics struct {
	requests *prometheus.CounterVec
	upstream *prometheus.HistogramVec
}

// outcomePassthrough counts requests that matched no route, or a route
// whose key is optional and did not come.
const outcomePassthrough = "passthrough"

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemnode_proxy_requests_total",
			Help: "Requests by how the proxy answered: executed, released, unrecorded, replayed, conflict, mismatch, expired, limited, unavailable, refused, passthrough."},
			[]string{"outcome"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "idemnode_proxy_upstream_seconds",
			Help:    "Time to the upstream's response headers, by result: response, or error (refused, broken, timed out).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"result"}),
	}
	for _, o := range []idemhttp.Outcome{idemhttp.OutcomeExecuted, idemhttp.OutcomeReleased, idemhttp.OutcomeUnrecorded, idemhttp.OutcomeReplayed,
		idemhttp.OutcomeConflict, idemhttp.OutcomeMismatch, idemhttp.OutcomeExpired, idemhttp.OutcomeLimited, idemhttp.OutcomeUnavailable,
		idemhttp.OutcomeRefused, outcomePassthrough} {
		m.requests.WithLabelValues(string(o))
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.upstream} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(_ *http.Request, o idemhttp.Outcome) {
	m.requests.WithLabelValues(string(o)).Inc()
}

// timedTransport records each upstream round trip.
type timedTransport struct {
	next http.RoundTripper
	m    *metrics
}

func (t timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	result := "response"
	if err != nil {
		result = "error"
	}
	t.m.upstream.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return resp, err
}
