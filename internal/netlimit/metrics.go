package netlimit

import "github.com/prometheus/client_golang/prometheus"

// Metrics holds the listeners' metrics in one registry.
type Metrics struct {
	held    *prometheus.GaugeVec
	max     *prometheus.GaugeVec
	refused *prometheus.CounterVec
}

// NewMetrics registers the listeners' metrics with reg:
// idemnode_listener_connections and idemnode_listener_max_connections
// (held now, and the cap), and idemnode_listener_refused_total by reason
// (listener_cap, address_cap), each labelled by listener.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idemnode_listener_connections",
			Help: "Connections a client listener holds now."}, []string{"listener"}),
		max: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idemnode_listener_max_connections",
			Help: "The most connections a client listener holds at once."}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemnode_listener_refused_total",
			Help: "Connections closed at accept because they were over a cap: the listener's (listener_cap) or one address's (address_cap)."},
			[]string{"listener", "reason"}),
	}
	reg.MustRegister(m.held, m.max, m.refused)
	return m
}

// listenerMetrics are one listener's series; without Metrics they count
// into series no registry holds.
type listenerMetrics struct {
	held                     prometheus.Gauge
	refusedAll, refusedAddrs prometheus.Counter
}

func (m *Metrics) forListener(name string, max int) listenerMetrics {
	if m == nil {
		return listenerMetrics{held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "unregistered"}),
			refusedAll:   prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"}),
			refusedAddrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})}
	}
	m.max.WithLabelValues(name).Set(float64(max))
	return listenerMetrics{held: m.held.WithLabelValues(name),
		refusedAll: m.refused.WithLabelValues(name, reasonListener), refusedAddrs: m.refused.WithLabelValues(name, reasonAddress)}
}

func (m listenerMetrics) refused(reason string) {
	if reason == reasonAddress {
		m.refusedAddrs.Inc()
		return
	}
	m.refusedAll.Inc()
}
