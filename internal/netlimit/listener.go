// Package netlimit bounds what clients can hold of a server's network
// resources: connections per listener and per source address, and the file
// descriptors the client listeners may take beside those the node keeps for
// itself (Raft, gossip, forwarding, the store's files).
package netlimit

import (
	"net"
	"net/netip"
	"sync"
)

// Config bounds one listener.
type Config struct {
	// Name labels the listener's metrics: grpc, api, http or proxy.
	Name string
	// Max is the most connections the listener holds at once (at least 1).
	Max int
	// MaxPerIP is the most connections it holds from one source address;
	// 0 is no such cap. Clients behind one NAT or a proxy sidecar share an
	// address, so it is off unless an operator sizes it.
	MaxPerIP int
	// Exempt reports whether a source address is one of the cluster's own
	// nodes: no cap refuses their connections (forwarding to the leader
	// arrives on the gRPC port). It is asked only for a connection over a
	// cap. Nil: no address is exempt.
	Exempt func(netip.Addr) bool
	// Metrics counts held and refused connections; nil: none.
	Metrics *Metrics
}

// Listener is a net.Listener that holds at most Config.Max connections
// (and Config.MaxPerIP from one address). A connection over a cap is
// accepted and closed at once with a reset, rather than left unaccepted:
// left in the kernel's backlog it would wait there for minutes, and the
// cluster's own peers behind it with it, while accepting and closing it
// takes one descriptor for a moment and tells the client at once.
type Listener struct {
	net.Listener
	cfg Config
	m   listenerMetrics

	// mu guards total and perIP, which Accept and every Close change.
	mu    sync.Mutex
	total int
	perIP map[netip.Addr]int
}

// Limit wraps ln with the caps of cfg.
func Limit(ln net.Listener, cfg Config) *Listener {
	if cfg.Max < 1 {
		cfg.Max = 1
	}
	l := &Listener{Listener: ln, cfg: cfg, m: cfg.Metrics.forListener(cfg.Name, cfg.Max)}
	if cfg.MaxPerIP > 0 {
		l.perIP = map[netip.Addr]int{}
	}
	return l
}

// Accept returns the next connection within the caps; it closes those over
// them on the way.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := sourceAddr(c)
		if reason := l.admit(ip); reason != "" {
			l.m.refused(reason)
			refuse(c)
			continue
		}
		return wrapConn(c, func() { l.release(ip) }), nil
	}
}

// Held returns the connections the listener holds now.
func (l *Listener) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Reasons a connection is refused, as the refused counter labels them.
const (
	reasonListener = "listener_cap"
	reasonAddress  = "address_cap"
)

// admit counts a connection from ip in, or says which cap refuses it.
func (l *Listener) admit(ip netip.Addr) string {
	l.mu.Lock()
	reason := l.over(ip)
	if reason == "" {
		l.add(ip)
	}
	l.mu.Unlock()
	if reason == "" {
		return ""
	}
	// Exempt may look up the cluster's members: not under the lock, and
	// only for connections over a cap, so the common path never asks.
	if l.cfg.Exempt == nil || !ip.IsValid() || !l.cfg.Exempt(ip) {
		return reason
	}
	l.mu.Lock()
	l.add(ip)
	l.mu.Unlock()
	return ""
}

func (l *Listener) over(ip netip.Addr) string {
	if l.total >= l.cfg.Max {
		return reasonListener
	}
	if l.perIP != nil && l.perIP[ip] >= l.cfg.MaxPerIP {
		return reasonAddress
	}
	return ""
}

func (l *Listener) add(ip netip.Addr) {
	l.total++
	if l.perIP != nil {
		l.perIP[ip]++
	}
	l.m.held.Inc()
}

func (l *Listener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perIP != nil {
		if l.perIP[ip]--; l.perIP[ip] <= 0 {
			delete(l.perIP, ip)
		}
	}
	l.m.held.Dec()
}

// sourceAddr is the connection's remote address, IPv4 in IPv6 unmapped so
// that one client counts as one address; invalid when it is not IP.
func sourceAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// refuse closes c with a reset: the client learns at once, and the
// closed socket leaves no TIME_WAIT behind on the server under a flood.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// conn releases its place in the listener's count once, at its first Close.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func wrapConn(c net.Conn, release func()) net.Conn {
	return &conn{Conn: c, release: release}
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes a TCP connection: net/http uses it to end a
// response before closing, so the client reads the response rather than a
// reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
