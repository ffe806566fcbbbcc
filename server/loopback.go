package server

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// checkLoopback refuses, when LoopbackOnly is set, every listener address
// that is not on loopback, and pins the name localhost to 127.0.0.1. An
// empty gRPC address binds every interface, so it is refused too; an empty
// gossip, HTTP or JSON API address turns that listener off (and an empty
// Raft address is refused by the node).
func (c *Config) checkLoopback() error {
	if !c.LoopbackOnly {
		return nil
	}
	for _, l := range []struct {
		flag     string
		addr     *string
		optional bool
	}{
		{"--grpc-addr", &c.GRPCAddr, false},
		{"--raft-addr", &c.RaftAddr, true},
		{"--gossip-addr", &c.GossipAddr, true},
		{"--http-addr", &c.HTTPAddr, true},
		{"--api-addr", &c.APIAddr, true},
	} {
		if *l.addr == "" && l.optional {
			continue
		}
		pinned, ok := loopbackAddr(*l.addr)
		if !ok {
			return fmt.Errorf("--dev serves in plaintext, on loopback only: %s %q is not a loopback address "+
				"(use 127.0.0.1, another 127.x.y.z, ::1 or localhost; to serve elsewhere, use TLS, or --insecure instead of --dev)",
				l.flag, *l.addr)
		}
		*l.addr = pinned
	}
	return nil
}

// loopbackAddr reports whether a listen address host:port binds loopback
// only: an IP in 127.0.0.0/8 or ::1, or the name localhost, and returns the
// address to listen on. localhost becomes 127.0.0.1 rather than being
// resolved: /etc/hosts or a resolver may map it elsewhere, and the listener
// would resolve it again after this check. Any other name is refused: what
// it resolves to may change, and a name of this host usually resolves to
// its LAN address.
func loopbackAddr(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	if strings.EqualFold(host, "localhost") {
		return net.JoinHostPort("127.0.0.1", port), true
	}
	ip, err := netip.ParseAddr(host)
	return addr, err == nil && ip.Unmap().IsLoopback()
}
