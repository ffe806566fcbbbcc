package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// Cluster identity (cluster/DESIGN.md). A cluster's first leader proposes
// a random identity once every voter runs a release that checks it
// (fsm.TypeIdentify, level 4): the same path gives a new cluster its
// identity right after bootstrap and an upgraded one after its last voter
// is upgraded, with no fork in either. From then on the identity is in
// every replica's store and every snapshot and backup, gossiped in the
// node's metadata, and checked on every Raft connection
// (peerhandshake.go); the leader adds a voter only with the same identity
// or an empty state (admits).

// clusterIDBytes is the length of an identity this release draws.
const clusterIDBytes = 16

// NewClusterID draws a new cluster identity.
func NewClusterID() []byte {
	id := make([]byte, clusterIDBytes)
	rand.Read(id) // never fails (crypto/rand)
	return id
}

// ClusterID returns the cluster's identity in hex, "" before the cluster
// has one (as gossip carries it).
func (n *Node) ClusterID() string { return hex.EncodeToString(n.Machine().Cluster()) }

// hasState reports whether this node holds Raft state: a log or applied
// entries. A node with none joins any cluster empty.
func (n *Node) hasState() bool {
	return n.raft.LastIndex() > 0 || n.Machine().Applied() > 0
}

// runIdentity keeps the gossiped identity in line with the state, and, on
// the leader of a cluster without one, proposes it. It also runs the check
// of a joining node (refuseForeignJoin) for its first joinCheckWindow.
func (n *Node) runIdentity() {
	defer n.wg.Done()
	t := time.NewTicker(min(n.cfg.ReconcileInterval, time.Second))
	defer t.Stop()
	joinCheckUntil := time.Now().Add(joinCheckWindow)
	for {
		changed := n.LeaderChanged()
		if n.members != nil {
			n.members.setIdentity(n.ClusterID(), n.hasState())
		}
		if n.raft.State() == raft.Leader && len(n.Machine().Cluster()) == 0 {
			n.proposeIdentity()
		}
		if len(n.cfg.Join) > 0 && time.Now().Before(joinCheckUntil) {
			if err := n.refuseForeignJoin(); err != nil {
				n.fail(err)
				return
			}
		}
		select {
		case <-n.stop:
			return
		case <-changed:
		case <-t.C:
		}
	}
}

// proposeIdentity commits a new identity, if every voter can apply it and
// no server the cluster would then refuse is about to come back.
func (n *Node) proposeIdentity() {
	if err := n.appliedEverywhere(4); err != nil {
		return // a voter runs an older release; retried on the next tick
	}
	if n.members != nil {
		f := n.raft.GetConfiguration()
		if f.Error() != nil {
			return
		}
		inConfig := map[string]bool{}
		for _, s := range f.Configuration().Servers {
			inConfig[string(s.ID)] = true
		}
		if why := identityHeldBack(n.members.members(), inConfig, n.cfg.NodeID, time.Now()); why != "" {
			n.log.Debug("cluster identity held back", "why", why)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.Apply(ctx, &fsm.Command{Type: fsm.TypeIdentify, Cluster: NewClusterID()})
	switch {
	case err != nil:
		n.log.Debug("propose the cluster identity", "err", err)
	case res.Outcome == fsm.OutcomeOK:
		n.log.Info("cluster identity set", "cluster", n.ClusterID())
	}
}

// identityHoldoff is how long a server of an older release that left or
// died holds the identity back. A rolling upgrade stops every node in turn,
// and SIGTERM removes it from the configuration: while the last old node is
// away, every voter runs this release. Given an identity then, the cluster
// would refuse that node on its return, since it holds state from before
// identities (admits); so the identity waits until it is back.
const identityHoldoff = 10 * time.Minute

// identityHeldBack says why the cluster must not get its identity yet, ""
// when it may: a member of an older release alive, or gone for less than
// identityHoldoff; or a member alive and outside the configuration holding
// state without an identity (reconcile adds it first, while it still may).
func identityHeldBack(members []Member, inConfig map[string]bool, self string, now time.Time) string {
	for _, m := range members {
		switch {
		case m.ID == self:
		case m.Applies < 4 && (m.State == "alive" || now.Sub(m.Since) < identityHoldoff):
			return fmt.Sprintf("%s (%s) runs a release without cluster identities", m.ID, m.State)
		case m.State == "alive" && !inConfig[m.ID] && m.HasState && m.Cluster == "":
			return fmt.Sprintf("%s holds state from before identities and is not in the configuration yet", m.ID)
		}
	}
	return ""
}

// joinCheckWindow is how long after start a node started with --join
// checks the identities of the servers it met. Only then: afterwards a
// server that joins our gossip holding another cluster's state must not be
// able to make us stop (the leader refuses to add it instead).
const joinCheckWindow = 30 * time.Second

// refuseForeignJoin returns an error when this node, holding the state of
// one cluster, joined the servers of another: some server gossips another
// identity and none shares ours. The first part is what a restored backup
// or an old data dir started with --join to a live cluster looks like; the
// second keeps a member of a working cluster running whatever joins it.
func (n *Node) refuseForeignJoin() error {
	ours := n.ClusterID()
	if ours == "" || n.members == nil {
		return nil
	}
	var others []string
	for _, m := range n.members.alive() {
		switch {
		case m.ID == n.cfg.NodeID || m.Cluster == "":
		case m.Cluster == ours:
			return nil
		default:
			others = append(others, fmt.Sprintf("%s (cluster %s)", m.ID, m.Cluster))
		}
	}
	if len(others) == 0 {
		return nil
	}
	m := n.Machine().Meta()
	return fmt.Errorf("%w: this node's data dir %s holds cluster %s (applied index %d, %d records), but the servers it joined belong to another: %s. "+
		"To add this node to that cluster, start it with an empty data dir; to keep its state, run it without --join as the first node of its own cluster, "+
		"and have the others join it empty (docs/OPERATIONS.md, disaster recovery)",
		ErrOtherCluster, n.cfg.DataDir, ours, m.Applied, m.Records, strings.Join(others, ", "))
}

// admits returns nil if the leader of cluster ours may add m as a voter:
// the same identity, or no state at all. Before the cluster has an
// identity (mid-upgrade) every server is admitted as before.
func admits(ours string, m Member) error {
	switch {
	case ours == "" || m.Cluster == ours:
		return nil
	case m.Applies < 4:
		return fmt.Errorf("it runs a release that does not check cluster identities: upgrade it first")
	case m.Cluster != "":
		return fmt.Errorf("%w: it holds the state of cluster %s, this is cluster %s; to add it here, wipe its data dir so it joins empty", ErrOtherCluster, m.Cluster, ours)
	case m.HasState:
		return fmt.Errorf("it holds Raft state without a cluster identity (another cluster's, or one from before identities); to add it here, wipe its data dir so it joins empty")
	}
	return nil
}

// fail reports a fault the node cannot run past; the process decides
// what to do with it (Fatal).
func (n *Node) fail(err error) {
	n.log.Error("stopping", "err", err)
	n.faults.hold(err)
}

// Fatal returns a channel that receives an error when the node cannot go on
// (a data dir holding another cluster's state joined to a live cluster; a
// storage fault when Config.OnFatal is nil, wrapping ErrStorageFault).
// The node stays open; the caller closes it and exits. Every caller's
// channel receives the fault; none does once the node is closed.
func (n *Node) Fatal() <-chan error { return n.faults.wait(n.stop) }

// refusedPeer reports a Raft connection refused for another cluster.
func (n *Node) refusedPeer(peer string, theirs []byte, accepting bool) {
	n.metrics.foreignRefused.Inc()
	what := "refused a Raft connection to a server holding another cluster's state"
	if accepting {
		what = "refused a Raft connection from a server holding another cluster's state"
	}
	n.refusals.report(peer, what, "theirs", FormatClusterID(theirs), "ours", FormatClusterID(n.Machine().Cluster()),
		"what to do", "a server that should join this cluster must start with an empty data dir")
}
