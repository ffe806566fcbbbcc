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

// NewFSM returns an FSM over an empty Machine.
func NewFSM() *FSM { return &FSM{Machine: NewMachine()} }

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// Apply decodes and applies one committed entry and returns its Result. An
// entry that cannot be decoded panics: a node that cannot apply the log must
// stop rather than diverge from the others.
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		f.MarkApplied(l.Index)
		return nil
	}
	c, err := DecodeCommand(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: cannot apply log entry %d: %v", l.Index, err))
	}
	return f.Machine.Apply(l.Index, c)
}

// ApplyBatch applies entries raft hands over together, in order.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		out[i] = f.Apply(l)
	}
	return out
}

// Snapshot captures an immutable view in O(1); Persist writes it out while
// Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{st: f.view()}, nil
}

// Restore replaces the state with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.Machine.Restore(rc)
}

type fsmSnapshot struct{ st *state }

// Persist streams the captured state and cancels the sink on any error, so
// a partial snapshot is never kept.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.st.writeSnapshot(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot %s: %w", sink.ID(), err)
	}
	return sink.Close()
}

// Release drops the captured view.
func (s *fsmSnapshot) Release() { s.st = nil }
