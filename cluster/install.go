package cluster

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// What becomes of a follower's log when it installs a snapshot.
//
// hashicorp/raft (v1.7.3, still in v1.8.0: hashicorp/raft#697), having
// restored an InstallSnapshot, empties a log store that refuses gaps
// (raft-wal) but keeps its in-memory last log index. A follower whose log
// ran past the snapshot then believes it holds entries it no longer has: it
// accepts an append that follows them, stores it after the hole, and panics
// applying the first missing entry; after a restart the log starts past the
// store and the node can never start again (found by the 60-minute nightly
// jepsen run, docs/RELIABILITY.md). The follower got there by installing the
// leader's snapshot at its store's index again after it had appended the
// next entry.
//
// So raft asks the log store (guardedLogStore.IsMonotonic) and gets the
// answer planInstall gave before the store was swapped:
//
//   - a log that ends at or before the snapshot is emptied, as raft does:
//     its last index is then below the snapshot's, and raft goes by the
//     snapshot;
//   - a log that runs past the snapshot and reaches back to the entry after
//     it is kept, and raft only compacts its head up to the snapshot (rule 6
//     of the Raft paper's Figure 13). Entries after the snapshot that
//     conflict with the leader's are truncated by the next append, as
//     always; none is applied before, since an append is accepted only
//     where the two logs match;
//   - a log that runs past the snapshot but starts after the entry that
//     follows it (the store already holds a later state) would leave the
//     entries in between unapplied: the install is refused, nothing
//     changes, and the leader retries with its store as it is then.
type installPlan struct {
	keepLog bool
}

// planInstall decides, from the log's bounds, what to do with the log when
// a snapshot that ends at index is installed.
func planInstall(first, last, index uint64) (installPlan, error) {
	switch {
	case last <= index:
		return installPlan{keepLog: false}, nil
	case first <= index+1:
		return installPlan{keepLog: true}, nil
	}
	return installPlan{}, fmt.Errorf("refusing a snapshot that ends at entry %d: the log holds entries %d-%d, so entries %d-%d would never be applied",
		index, first, last, index+1, first-1)
}

// planInstall reads the log's bounds and plans the install of a snapshot
// that ends at index. Raft's main loop waits for the restore meanwhile, so
// the log does not change between the plan and raft's use of it.
func (g *guardedLogStore) planInstall(index uint64) (installPlan, error) {
	first, last, err := logBounds(g.LogStore)
	if err != nil {
		return installPlan{}, fmt.Errorf("read the log's bounds before installing a snapshot: %w", err)
	}
	return planInstall(first, last, index)
}

// installed records the plan of the snapshot just restored, for raft's
// question that follows (IsMonotonic).
func (g *guardedLogStore) installed(p installPlan) { g.keepLogOnce.Store(p.keepLog) }

// IsMonotonic tells raft, which asks only after restoring a snapshot,
// whether to empty the log (true) or only compact its head (false). The
// wrapped store refuses gaps (raft.MonotonicLogStore), so the log is
// emptied unless the install's plan keeps it (see above).
func (g *guardedLogStore) IsMonotonic() bool {
	if g.keepLogOnce.Swap(false) {
		return false
	}
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
