package cluster

import (
	"context"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// trackedFSM records the index of the last log entry the state machine has
// applied. raft.AppliedIndex is not that: raft advances it when it hands
// entries to the FSM goroutine, before they are applied. Linearizable reads
// wait on this index instead.
type trackedFSM struct {
	*fsm.FSM

	// mu guards applied and changed; changed is closed and replaced at every
	// advance, which wakes all waiters without a poll loop.
	mu      sync.Mutex
	applied uint64
	changed chan struct{}
}

func newTrackedFSM() *trackedFSM {
	return &trackedFSM{FSM: fsm.NewFSM(), changed: make(chan struct{})}
}

// Apply applies one entry, then advances the applied index.
func (t *trackedFSM) Apply(l *raft.Log) interface{} {
	res := t.FSM.Apply(l)
	t.advance(l.Index)
	return res
}

// ApplyBatch applies entries raft hands over together, then advances the
// applied index once.
func (t *trackedFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	res := t.FSM.ApplyBatch(logs)
	if len(logs) > 0 {
		t.advance(logs[len(logs)-1].Index)
	}
	return res
}

func (t *trackedFSM) advance(index uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if index > t.applied {
		t.applied = index
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// Applied returns the index of the last entry the state machine applied.
func (t *trackedFSM) Applied() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.applied
}

// waitApplied blocks until the state machine applied index or ctx ends.
func (t *trackedFSM) waitApplied(ctx context.Context, index uint64) error {
	for {
		t.mu.Lock()
		applied, changed := t.applied, t.changed
		t.mu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
