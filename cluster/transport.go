package cluster

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// boundStreamLayer is raft's network layer with every outgoing connection
// bound to the node's own IP. Without the bind, a node on 127.0.0.12 that
// dials 127.0.0.11 sends from 127.0.0.1, and a partition rule on the node's
// address would not cut it (cluster/DESIGN.md). On a multi-homed host it also
// makes the source address predictable for firewalls.
type boundStreamLayer struct {
	net.Listener
	advertise net.Addr
	dialer    net.Dialer
}

func newBoundStreamLayer(bind, advertise string) (*boundStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("listen raft %s: %w", bind, err)
	}
	adv, err := resolveAdvertise(advertise, ln.Addr())
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &boundStreamLayer{Listener: ln, advertise: adv, dialer: BoundDialer(ln.Addr())}, nil
}

// Dial opens a connection to a peer's raft address from our own IP.
func (s *boundStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := s.dialer
	d.Timeout = timeout
	return d.Dial("tcp", string(addr))
}

// Addr is the address peers use to reach us.
func (s *boundStreamLayer) Addr() net.Addr { return s.advertise }

// BoundDialer returns a dialer whose connections leave from local's IP (any
// port), or an unbound dialer when local is a wildcard address.
func BoundDialer(local net.Addr) net.Dialer {
	tcp, ok := local.(*net.TCPAddr)
	if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		return net.Dialer{}
	}
	return net.Dialer{LocalAddr: &net.TCPAddr{IP: tcp.IP}}
}

// resolveAdvertise picks the address peers dial: the configured one, or the
// listener's own when it is not a wildcard.
func resolveAdvertise(advertise string, bound net.Addr) (net.Addr, error) {
	if advertise == "" {
		tcp := bound.(*net.TCPAddr)
		if tcp.IP.IsUnspecified() {
			return nil, errors.New("raft address binds all interfaces: set an advertise address")
		}
		return bound, nil
	}
	adv, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, fmt.Errorf("resolve raft advertise address %q: %w", advertise, err)
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft advertise address %q is not a reachable address", advertise)
	}
	return adv, nil
}
