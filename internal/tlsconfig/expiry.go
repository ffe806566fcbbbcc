package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Expiries returns when each certificate file in use stops being valid:
// the earliest notAfter of its certificates (a chain expires with its
// first certificate), keyed api, peer, client_ca and peer_ca; a file not
// in use is left out. Files changed on disk are read again first, as a
// handshake would.
func (n *Node) Expiries() map[string]time.Time {
	out := map[string]time.Time{"api": chainNotAfter(n.api.get())}
	if n.peer != nil {
		out["peer"] = chainNotAfter(n.peer.get())
	}
	if n.clientCA != nil {
		out["client_ca"] = n.clientCA.get().notAfter
	}
	if n.peerCA != nil {
		out["peer_ca"] = n.peerCA.get().notAfter
	}
	return out
}

// chainNotAfter is the earliest notAfter of a key pair's chain.
func chainNotAfter(c *tls.Certificate) time.Time {
	var t time.Time
	for _, der := range c.Certificate {
		if x, err := x509.ParseCertificate(der); err == nil {
			t = earliest(t, x.NotAfter)
		}
	}
	return t
}

// earliest is the earlier of a and b, where zero means unset.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// ExpiryCollector exports Expiries as
// idemnode_certificate_expiry_timestamp_seconds{cert}, read at scrape time,
// so an alert sees a renewed certificate as soon as the node would use it.
type ExpiryCollector struct {
	node *Node
	desc *prometheus.Desc
}

// NewExpiryCollector returns the collector of n's certificates.
func NewExpiryCollector(n *Node) *ExpiryCollector {
	return &ExpiryCollector{node: n, desc: prometheus.NewDesc("idemnode_certificate_expiry_timestamp_seconds",
		"Unix time the certificates of a file in use expire (the earliest notAfter), by file: api, peer, client_ca, peer_ca.",
		[]string{"cert"}, nil)}
}

func (c *ExpiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ExpiryCollector) Collect(ch chan<- prometheus.Metric) {
	for cert, t := range c.node.Expiries() {
		if t.IsZero() {
			continue // no certificate parsed: year 1 would read as long expired
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(t.Unix()), cert)
	}
}
