package rpc

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/idemnode/idemnode/cluster"
)

// peerRefresh is how long PeerAddrs trusts the member list it read: a
// node that just joined waits at most this long to be exempt.
const peerRefresh = time.Second

// PeerAddrs returns a function that reports whether an address is one of
// the cluster's nodes, from the members backend knows (their gossip, Raft
// and gRPC addresses, where these are IP addresses, and the Raft
// configuration's). Connection caps exempt these addresses: a follower
// forwards its clients' calls to the leader's gRPC port, from its own gRPC
// listen address or, listening on every address, from the one the system
// routes by (usually its gossip address). The member list is read at most
// once per peerRefresh, and only when asked.
func PeerAddrs(backend interface {
	Members() (cluster.Membership, error)
}) func(netip.Addr) bool {
	var (
		// mu guards addrs and read: one caller refreshes, the others wait
		// for its answer rather than read the members again.
		mu    sync.Mutex
		addrs map[netip.Addr]bool
		read  time.Time
	)
	return func(ip netip.Addr) bool {
		mu.Lock()
		defer mu.Unlock()
		if read.IsZero() || time.Since(read) > peerRefresh {
			// A failed read keeps the addresses known before, and waits
			// its turn like a good one: a flood is not a stream of reads.
			if m, err := backend.Members(); err == nil || len(m.Members) > 0 {
				addrs = memberAddrs(m)
			}
			read = time.Now()
		}
		return addrs[ip.Unmap()]
	}
}

// memberAddrs collects the IP addresses in m.
func memberAddrs(m cluster.Membership) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	add := func(hostport string) {
		host, _, err := net.SplitHostPort(hostport)
		if err != nil {
			host = hostport
		}
		if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
			out[ip.Unmap()] = true
		}
	}
	for _, mb := range m.Members {
		add(mb.Gossip)
		add(mb.Raft)
		add(mb.GRPC)
	}
	for _, s := range m.Servers {
		add(s.Address)
	}
	return out
}
