package netlimit

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/internal/testaddr"
)

// serveLimited listens on 127.0.0.1 within cfg's caps and hands every
// connection it accepts to the returned channel.
func serveLimited(t *testing.T, cfg Config) (*Listener, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	l := Limit(ln, cfg)
	accepted := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	return l, accepted
}

// dialFrom connects to l from the loopback address src.
func dialFrom(t *testing.T, l net.Listener, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c within wait: a read
// ends with EOF or a reset rather than at the deadline. Checking that a
// connection stays open waits a short while; that one is closed, long.
func closedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

func mustAccept(t *testing.T, accepted <-chan net.Conn, what string) net.Conn {
	t.Helper()
	select {
	case c := <-accepted:
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was not accepted", what)
	}
	return nil
}

// TestListenerClosesConnectionsOverItsCap: with 3 held, a fourth is closed
// at once and counted; once one held closes, a new one is accepted.
func TestListenerClosesConnectionsOverItsCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, accepted := serveLimited(t, Config{Name: "grpc", Max: 3, Metrics: NewMetrics(reg)})
	var held []net.Conn
	for i := range 3 {
		c := dialFrom(t, l, "127.0.0.1")
		held = append(held, mustAccept(t, accepted, "a connection within the cap"))
		if closedByServer(c, 200*time.Millisecond) {
			t.Fatalf("connection %d within the cap was closed", i+1)
		}
	}
	if !refused(t, l, "127.0.0.1") {
		t.Fatal("a connection over the cap was left open")
	}
	if got := value(t, reg, "idemnode_listener_refused_total", "grpc", reasonListener); got != 1 {
		t.Errorf("refused connections counted: %v, want 1", got)
	}
	if got := value(t, reg, "idemnode_listener_connections", "grpc"); got != 3 || l.Held() != 3 {
		t.Errorf("held: gauge %v, Held %d, want 3", got, l.Held())
	}
	if got := value(t, reg, "idemnode_listener_max_connections", "grpc"); got != 3 {
		t.Errorf("max gauge %v, want 3", got)
	}
	held[0].Close()
	held[0].Close() // a second Close releases nothing more
	if l.Held() != 2 {
		t.Fatalf("held after one closed twice: %d, want 2", l.Held())
	}
	c := dialFrom(t, l, "127.0.0.1")
	mustAccept(t, accepted, "a connection after one closed")
	if closedByServer(c, 200*time.Millisecond) {
		t.Fatal("a connection after one closed was refused")
	}
}

// TestListenerCapsOneAddress: one address holds at most MaxPerIP; another
// address still gets in.
func TestListenerCapsOneAddress(t *testing.T) {
	l, accepted := serveLimited(t, Config{Name: "api", Max: 10, MaxPerIP: 2})
	addrs := testaddr.New(t)
	for range 2 {
		dialFrom(t, l, addrs.IP(2))
		mustAccept(t, accepted, "a connection within the address cap")
	}
	if !refused(t, l, addrs.IP(2)) {
		t.Fatal("a third connection from one address was left open")
	}
	c := dialFrom(t, l, addrs.IP(3))
	mustAccept(t, accepted, "a connection from another address")
	if closedByServer(c, 200*time.Millisecond) {
		t.Fatal("another address was refused")
	}
}

// TestListenerExemptsPeers: over both caps, an exempt address still gets
// in and counts; Exempt is asked only over a cap.
func TestListenerExemptsPeers(t *testing.T) {
	var asked atomic.Int32
	addrs := testaddr.New(t)
	peer := netip.MustParseAddr(addrs.IP(2))
	l, accepted := serveLimited(t, Config{Name: "grpc", Max: 1, MaxPerIP: 1, Exempt: func(ip netip.Addr) bool {
		asked.Add(1)
		return ip == peer
	}})
	dialFrom(t, l, addrs.IP(3))
	mustAccept(t, accepted, "the first connection")
	if asked.Load() != 0 {
		t.Fatalf("Exempt asked %d times within the caps", asked.Load())
	}
	for range 2 {
		c := dialFrom(t, l, addrs.IP(2))
		mustAccept(t, accepted, "a peer's connection over the caps")
		if closedByServer(c, 200*time.Millisecond) {
			t.Fatal("a peer's connection was refused")
		}
	}
	if !refused(t, l, addrs.IP(4)) {
		t.Fatal("a client over the cap was left open")
	}
	if l.Held() != 3 {
		t.Fatalf("held %d, want 3 (the peers' count too)", l.Held())
	}
}

// value reads the value of a gauge or counter of reg with the given
// label values, in the order of its labels.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetValue())
			}
			if slices.Equal(got, labels) {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// refused reports whether a connection from src is closed by the server at
// once: the dial itself fails with a reset, or the first read ends.
func refused(t *testing.T, l net.Listener, src string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	defer c.Close()
	return closedByServer(c, 5*time.Second)
}
