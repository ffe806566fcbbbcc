package rpc

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// Metrics are the API's Prometheus series.
type Metrics struct {
	duration  *prometheus.HistogramVec
	claims    *prometheus.CounterVec
	forwarded *prometheus.CounterVec
	// claimsBy holds claims' children by outcome, resolved once, so the
	// claim path formats no label.
	claimsBy map[idempb.Outcome]prometheus.Counter
}

// NewMetrics creates the API series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "idemnode_rpc_duration_seconds",
			Help:    "gRPC call latency on this node, by method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"method", "code"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemnode_claims_total",
			Help: "Claims answered to clients of this node, by outcome."}, []string{"outcome"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemnode_forwarded_total",
			Help: "Calls this node forwarded to the leader, by method."}, []string{"method"}),
	}
	reg.MustRegister(m.duration, m.claims, m.forwarded)
	// The idempotency methods' series exist from the start (successes,
	// forwards, and the failures IdemnodeClaimsFailing watches), so rates
	// and ratios over them read 0 rather than nothing before the first
	// call, and the first failure is a step a rate sees; other codes appear
	// with their first call.
	for _, md := range idempb.Idempotency_ServiceDesc.Methods {
		for _, code := range []codes.Code{codes.OK, codes.Unavailable, codes.Internal} {
			m.duration.WithLabelValues(md.MethodName, code.String())
		}
		m.forwarded.WithLabelValues(md.MethodName)
	}
	m.claimsBy = map[idempb.Outcome]prometheus.Counter{}
	for v, name := range idempb.Outcome_name {
		m.claimsBy[idempb.Outcome(v)] = m.claims.WithLabelValues(strings.ToLower(strings.TrimPrefix(name, "OUTCOME_")))
	}
	return m
}

// UnaryInterceptor times every call.
func (m *Metrics) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		method := info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:]
		m.duration.WithLabelValues(method, status.Code(err).String()).Observe(time.Since(start).Seconds())
		return resp, err
	}
}

// WithMetrics makes the server count claims, forwards and waits into m,
// and export the number of waits in progress.
func WithMetrics(m *Metrics, reg prometheus.Registerer) Option {
	return func(s *Server) {
		s.metrics = m
		s.tenantClaims = &tenantClaims{counts: map[string]*atomic.Uint64{}}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemnode_waits_in_progress",
			Help: "Calls held waiting on this node."}, func() float64 { total, _ := s.waits.active(""); return float64(total) }),
			newTenantCollector(s))
	}
}

// countClaim counts a claim's answer once, on the node the client called.
func (s *Server) countClaim(ctx context.Context, tenant string, resp *idempb.ClaimResponse) {
	if s.metrics == nil || resp == nil || isForwarded(ctx) {
		return
	}
	if c, ok := s.metrics.claimsBy[resp.Outcome]; ok {
		c.Inc()
	}
	s.tenantClaims.inc(tenant)
}

// countForward counts a call forwarded to the leader, by its method.
func (s *Server) countForward(ctx context.Context) {
	if s.metrics == nil {
		return
	}
	method, _ := grpc.Method(ctx)
	s.metrics.forwarded.WithLabelValues(method[strings.LastIndexByte(method, '/')+1:]).Inc()
}
