package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// runReconcile keeps the Raft configuration in line with membership while
// this node leads: live servers missing from it are added as voters (a
// server that comes back with a new address keeps its entry: the transport
// dials servers by id through gossip, see gossipAddresses), servers
// that left gracefully are removed, and, with DeadServerCleanup, servers
// dead for that long are removed while a quorum of healthy voters remains.
// It reacts to gossip events and also runs on a tick, so a change missed
// while another node led is picked up.
func (n *Node) runReconcile() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.members.changed:
		case <-t.C:
		}
		if n.raft.State() == raft.Leader {
			n.reconcile()
		}
	}
}

func (n *Node) reconcile() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	inConfig := map[string]raft.Server{}
	for _, s := range servers {
		inConfig[string(s.ID)] = s
	}
	members := n.members.members()
	for _, m := range members {
		_, ok := inConfig[m.ID]
		switch {
		case m.State == "alive" && !ok:
			n.addVoter(m)
		case ok && m.State == "left" && m.ID != n.cfg.NodeID:
			n.removeServer(m.ID, "left")
		case ok && m.State == "dead" && n.deadLongEnough(m) && n.quorumSurvives(servers, members, m.ID):
			n.removeServer(m.ID, "dead")
		}
	}
}

func (n *Node) addVoter(m Member) {
	if err := admits(n.ClusterID(), m); err != nil {
		n.refusals.report(m.ID, "not adding voter", "id", m.ID, "raft", m.Raft, "err", err)
		return
	}
	if err := n.verifyPeer(m.Raft); err != nil {
		n.refusals.report(m.ID, "not adding voter: its Raft address does not prove a certificate of the cluster CA, or holds another cluster's state",
			"id", m.ID, "raft", m.Raft, "err", err)
		return
	}
	n.log.Info("adding voter", "id", m.ID, "raft", m.Raft)
	if err := n.await(context.Background(), n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.Raft), 0, 10*time.Second)); err != nil {
		n.log.Warn("add voter", "id", m.ID, "err", err)
	}
}

func (n *Node) removeServer(id, why string) {
	n.log.Info("removing server", "id", id, "reason", why)
	if err := n.await(context.Background(), n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second)); err != nil {
		n.log.Warn("remove server", "id", id, "err", err)
	}
}

func (n *Node) deadLongEnough(m Member) bool {
	return n.cfg.DeadServerCleanup > 0 && !m.Since.IsZero() && time.Since(m.Since) >= n.cfg.DeadServerCleanup
}

// quorumSurvives reports whether, with dead removed, the healthy voters
// still form a quorum of the smaller configuration. Removing servers is
// what shrinks the quorum, so it is done only while the cluster is healthy
// enough that the removal cannot be the step that loses it.
func (n *Node) quorumSurvives(servers []raft.Server, members []Member, dead string) bool {
	state := map[string]string{}
	for _, m := range members {
		state[m.ID] = m.State
	}
	voters, healthy := 0, 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter || string(s.ID) == dead {
			continue
		}
		voters++
		if st := state[string(s.ID)]; st == "alive" || string(s.ID) == n.cfg.NodeID {
			healthy++
		}
	}
	return healthy >= voters/2+1
}
