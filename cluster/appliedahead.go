//go:build faults

package cluster

import (
	"os"

	"github.com/idemnode/idemnode/fsm"
)

// BugAppliedAhead names the planted store bug (Faults.AppliedAhead) for
// `serve --fault-bug`.
const BugAppliedAhead = "applied-ahead"

// appliedAheadFile is where the planted bug applied-ahead keeps its index.
const appliedAheadFile = "applied-ahead.bug"

// appliedAheadStore plants a bug for the jepsen self-test
// (Faults.AppliedAhead): it writes each commit's log position (applied
// index and term, FSM time, Raft configuration) to a file of its own, which
// survives kill -9 in the page cache, and at open claims that position,
// while the records of those commits were never made durable (it does not
// even sync before a snapshot). Entries up
// to the claimed index are then skipped on replay: a crash of every node
// loses acknowledged writes, which jepsen must catch.
type appliedAheadStore struct {
	fsm.Store
	path string
}

func (s *appliedAheadStore) Commit(c *fsm.Changes) error {
	if err := s.Store.Commit(c); err != nil {
		return err
	}
	b, _ := c.Meta.MarshalBinary()
	return os.WriteFile(s.path, b, 0o600)
}

// Sync does nothing: the bug's store never makes its records durable on
// purpose (only the flushes the store starts itself do: after its first
// commit, after a full memtable, and every 3/4 memtable of commits, which a
// 30-second run does not reach), so every kill-all loses what was applied
// since the node started and the self-test sees the loss, whenever its
// kills fall.
func (s *appliedAheadStore) Sync() error { return nil }

// NewBuilder keeps the bug in the store an InstallSnapshot builds, which
// would otherwise replace the planted store with a correct one.
func (s *appliedAheadStore) NewBuilder() (fsm.Builder, error) {
	b, err := s.Store.NewBuilder()
	if err != nil {
		return nil, err
	}
	return appliedAheadBuilder{Builder: b, path: s.path}, nil
}

type appliedAheadBuilder struct {
	fsm.Builder
	path string
}

func (b appliedAheadBuilder) Install() (fsm.Store, error) {
	st, err := b.Builder.Install()
	if err != nil {
		return nil, err
	}
	return &appliedAheadStore{Store: st, path: b.path}, nil
}

func (s *appliedAheadStore) Meta() fsm.Meta {
	m := s.Store.Meta()
	var claimed fsm.Meta
	if b, err := os.ReadFile(s.path); err == nil && claimed.UnmarshalBinary(b) == nil && claimed.Applied > m.Applied {
		m.Applied, m.Term, m.Now = claimed.Applied, claimed.Term, claimed.Now
		m.ConfigIndex, m.Config = claimed.ConfigIndex, claimed.Config
	}
	return m
}
