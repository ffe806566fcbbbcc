package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// Bootstrap with --bootstrap-expect N (cluster/DESIGN.md, "Bootstrap"), done as rqlite and
// Consul do it: every node runs the same command line; each gossips until
// it sees N servers, and exactly one deterministic choice — the server with
// the smallest id among exactly N, none of which is already in a cluster —
// bootstraps a configuration of all N. The others are brought in by the
// first leader's heartbeats. A node with Raft state never bootstraps again,
// and nobody bootstraps while any peer reports it is in a cluster (that
// cluster's leader adds us instead), so there can never be two clusters.

// runBootstrap waits until this node is part of a cluster, bootstrapping
// one if it is the chosen node. It re-evaluates on a short tick because
// the condition depends on gossip state that changes without notice.
func (n *Node) runBootstrap(existing bool) {
	defer n.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if n.inCluster(existing) {
			// Done only once peers have heard it: until then they might
			// still bootstrap a cluster of their own.
			err := n.members.setInCluster(true)
			if err == nil || errors.Is(err, ErrShutdown) {
				return
			}
			n.log.Warn("gossip that this node is in a cluster; retrying", "err", err)
		} else if n.shouldBootstrap() {
			n.bootstrapExpected()
		}
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
	}
}

// inCluster reports whether this node belongs to a Raft configuration.
func (n *Node) inCluster(existing bool) bool {
	if existing {
		return true
	}
	f := n.raft.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 0
}

// shouldBootstrap reports whether this node is the one chosen to bootstrap.
func (n *Node) shouldBootstrap() bool {
	if n.cfg.BootstrapExpect < 2 {
		return false
	}
	alive := n.members.alive()
	if len(alive) != n.cfg.BootstrapExpect {
		if len(alive) > n.cfg.BootstrapExpect {
			n.log.Warn("more servers than bootstrap-expect; not bootstrapping", "seen", len(alive), "expect", n.cfg.BootstrapExpect)
		}
		return false
	}
	for _, m := range alive {
		if m.InCluster {
			return false
		}
	}
	return alive[0].ID == n.cfg.NodeID // alive is sorted by id
}

func (n *Node) bootstrapExpected() {
	var servers []raft.Server
	for _, m := range n.members.alive() {
		if err := n.verifyOther(m); err != nil {
			n.log.Warn("not bootstrapping: a server does not prove a certificate of the cluster CA", "id", m.ID, "raft", m.Raft, "err", err)
			return
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Raft)})
	}
	n.log.Info("bootstrapping cluster", "servers", len(servers))
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		n.log.Warn("bootstrap", "err", err)
	}
}

// runJoin joins the given gossip addresses, retrying until this node has
// met another server. Contacting only itself does not count: in Kubernetes
// every pod's join list names the pod itself, and the others may not
// resolve yet.
func (n *Node) runJoin() {
	defer n.wg.Done()
	backoff := 200 * time.Millisecond
	for {
		contacted, err := n.members.list.Join(n.cfg.Join)
		if n.metAnotherServer() {
			n.log.Info("joined gossip", "contacted", contacted)
			return
		}
		n.log.Warn("join gossip: no other server reached yet", "addrs", n.cfg.Join, "err", err)
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// metAnotherServer reports whether gossip knows a server besides this one.
func (n *Node) metAnotherServer() bool {
	for _, m := range n.members.members() {
		if m.ID != n.cfg.NodeID {
			return true
		}
	}
	return false
}
