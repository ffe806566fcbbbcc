package cluster

import (
	"fmt"
	"strings"
)

// Status is a node's view of itself and the cluster.
type Status struct {
	NodeID       string
	State        string // leader, follower, candidate, shutdown
	LeaderID     string
	LeaderAddr   string // the leader's gRPC address, when known
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64 // the last entry the state machine applied
	Records      int
	Digest       string
	FSMTime      int64
	// Cluster is the identity of the cluster whose state the node holds
	// (hex; "" before the cluster has one).
	Cluster string
}

// Status reports the node's raft state and a digest of its state machine.
// The digest is kept on every apply (fsm.Meta's Sum), so Status costs the
// same at any size.
func (n *Node) Status() Status {
	_, leaderID := n.raft.LeaderWithID()
	m := n.Machine()
	applied, digest := m.DigestAt()
	return Status{
		NodeID:       n.cfg.NodeID,
		State:        strings.ToLower(n.raft.State().String()),
		LeaderID:     string(leaderID),
		LeaderAddr:   n.grpcAddrOf(string(leaderID)),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: applied,
		Records:      m.Len(),
		Digest:       digest,
		FSMTime:      m.Now(),
		Cluster:      n.ClusterID(),
	}
}

// grpcAddrOf returns the client address of a node by id; this node knows
// its own, and the others' come from membership metadata.
func (n *Node) grpcAddrOf(id string) string {
	if id == "" {
		return ""
	}
	if id == n.cfg.NodeID {
		return n.cfg.GRPCAdvertise
	}
	if n.members != nil {
		if m, ok := n.members.member(id); ok {
			return m.GRPC
		}
	}
	return ""
}

// readyLag is how far behind what it knows to be committed a node may have
// applied and still be ready. Under load the newest committed entries are
// always on their way to the state machine, so an exact match would flap a
// busy node's readiness (and its leader's); a node catching up after a
// restart or an install is thousands of entries behind.
const readyLag = 1024

// Ready reports whether this node can serve: it knows a leader and its state
// machine has applied what it knows to be committed, within readyLag.
func (n *Node) Ready() error {
	if addr, _ := n.raft.LeaderWithID(); addr == "" {
		return ErrNoLeader
	}
	// Commit first: applied only grows, so the gap read is never larger
	// than it was at any instant between the two reads.
	commit := n.raft.CommitIndex()
	if applied := n.fsm.Applied(); applied+readyLag < commit {
		return fmt.Errorf("catching up: applied %d of %d", applied, commit)
	}
	return nil
}

// Leader returns the leader's id and gRPC address, empty when none is known.
func (n *Node) Leader() (id, grpcAddr string) {
	_, lid := n.raft.LeaderWithID()
	return string(lid), n.grpcAddrOf(string(lid))
}
