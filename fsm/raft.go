package fsm

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// FSM adapts Machine to hashicorp/raft. It only decodes log entries and
// hands them to Machine; the rules live in Machine and its handlers.
type FSM struct {
	*Machine
}

// NewFSM returns an FSM over m.
func NewFSM(m *Machine) *FSM { return &FSM{Machine: m} }

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// Apply decodes and applies one committed entry and returns its Result.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies the entries raft hands over together as one store
// commit. Raft hands over commands and configuration changes; the
// configuration is kept in the store's metadata with the applied index, so
// the store alone says what Raft's latest snapshot holds. An entry that
// cannot be decoded panics: a node that cannot apply the log must stop
// rather than diverge from the others.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	entries := make([]Entry, 0, len(logs))
	for _, l := range logs {
		e := Entry{Index: l.Index, Term: l.Term}
		switch l.Type {
		case raft.LogCommand:
			c, err := DecodeCommand(l.Data)
			if err != nil {
				panic(fmt.Sprintf("fsm: cannot apply log entry %d: %v", l.Index, err))
			}
			e.Cmd = c
		case raft.LogConfiguration:
			e.Config = l.Data
		}
		entries = append(entries, e)
	}
	results := f.Machine.ApplyEntries(entries)
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = results[i]
		}
	}
	return out
}

// Snapshot returns a snapshot that copies nothing: the store is the
// snapshot. Its Persist makes the store durable (see fsmSnapshot).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{m: f.Machine}, nil
}

// Restore replaces the state with a snapshot stream's, built in a fresh store.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.Machine.Restore(rc)
}

// fsmSnapshot is a local snapshot: metadata only, since the store holds
// the state (Raft's snapshot store lists the store's own metadata).
type fsmSnapshot struct{ m *Machine }

// Persist makes the store durable before the snapshot is recorded. This is
// the one place the store is forced to disk, and it must be here: once the
// sink is closed, Raft drops the log up to the snapshot's index (less its
// trailing entries), and the store applies without syncing, so an entry
// the store had not made durable would exist nowhere after a crash. The
// store may be ahead of the snapshot's index by then; durable through a
// later index is durable through this one.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.m.Sync(); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot %s: sync the store: %w", sink.ID(), err)
	}
	return sink.Close()
}

// Release does nothing: the snapshot holds nothing.
func (s *fsmSnapshot) Release() {}
