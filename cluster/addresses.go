package cluster

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// gossipAddresses tells raft's transport where a server is now, by id, from
// gossip metadata (as Consul does). The addresses in the Raft configuration
// are those servers had when they were added; pods, containers and
// replaced hosts come back with new IPs, and without this a cluster whose
// servers all moved could not elect a leader again. When gossip does not
// know a server, raft dials the configured address.
type gossipAddresses struct {
	members atomic.Pointer[membership]
}

// ServerAddr implements raft.ServerAddressProvider.
func (g *gossipAddresses) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	m := g.members.Load()
	if m == nil {
		return "", fmt.Errorf("membership not started")
	}
	mem, ok := m.member(string(id))
	if !ok || mem.Raft == "" || mem.State != "alive" {
		return "", fmt.Errorf("%w: %s not alive in gossip", ErrUnknownServer, id)
	}
	return raft.ServerAddress(mem.Raft), nil
}
