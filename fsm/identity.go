package fsm

import "bytes"

// A cluster's identity is a few random bytes the first leader proposes
// once, in an Identify command, after every voter runs a release that
// checks it (level 4). Applying it sets Meta.Cluster; it travels with the
// state in snapshot streams and backups, and the cluster package checks it
// on every Raft connection, so a node holding another cluster's state can
// never replicate with this one. A restored backup gets a new identity
// (the backup is the seed of a new cluster, not a member of the old one).

// MaxClusterID bounds a cluster identity's length in bytes.
const MaxClusterID = 32

// applyIdentify sets the cluster's identity if it has none. The first one
// applied wins: two leaders of different terms may each propose one, and
// every replica keeps the one earlier in the log. It answers OK when the
// identity it carries is the cluster's, and MISMATCH otherwise, so the
// proposer learns which one stands.
func (t *tx) applyIdentify(c *Command) Result {
	if len(t.meta.Cluster) == 0 {
		t.meta.Cluster = bytes.Clone(c.Cluster)
	}
	if bytes.Equal(t.meta.Cluster, c.Cluster) {
		return Result{Outcome: OutcomeOK}
	}
	return Result{Outcome: OutcomeMismatch}
}

// Cluster returns the cluster's identity, nil before it has one.
func (m *Machine) Cluster() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.Cluster
}
