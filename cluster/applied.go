package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// trackedFSM wakes goroutines waiting for the state machine to reach a log
// index. The index is the state machine's own (fsm.Machine.Applied), not
// raft.AppliedIndex, which raft advances when it hands entries to the FSM
// goroutine, before they are applied. Linearizable reads wait on it.
type trackedFSM struct {
	*fsm.FSM
	// metrics observe applies, snapshots and restores (nil: none).
	metrics *metrics

	// installs hands Restore the stores InstallSnapshot built; logs is
	// told what becomes of the log after each (install.go).
	installs *storeSnapshots
	logs     *guardedLogStore
	log      *slog.Logger

	// mu guards changed, which is closed and replaced after every apply or
	// restore: that wakes all waiters without a poll loop.
	mu      sync.Mutex
	changed chan struct{}
}

func newTrackedFSM(m *fsm.Machine) *trackedFSM {
	return &trackedFSM{FSM: fsm.NewFSM(m), changed: make(chan struct{})}
}

// Apply applies one entry, then wakes waiters.
func (t *trackedFSM) Apply(l *raft.Log) interface{} {
	defer t.wake()
	return t.FSM.Apply(l)
}

// ApplyBatch applies entries raft hands over together, then wakes waiters.
func (t *trackedFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	defer t.wake()
	if t.metrics != nil {
		t.metrics.applyBatch.Observe(float64(len(logs)))
	}
	return t.FSM.ApplyBatch(logs)
}

// Snapshot captures the state; its Persist is timed for the metrics.
func (t *trackedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := t.FSM.Snapshot()
	if t.metrics == nil {
		return s, err
	}
	if err != nil {
		t.metrics.snapshotFailures.WithLabelValues(stageCreate).Inc()
		return s, err
	}
	return timedSnapshot{FSMSnapshot: s, metrics: t.metrics}, nil
}

// Restore replaces the state and counts the restore or its failure.
func (t *trackedFSM) Restore(rc io.ReadCloser) error {
	err := t.restore(rc)
	if t.metrics != nil {
		if err != nil {
			t.metrics.snapshotFailures.WithLabelValues(stageRestore).Inc()
		} else {
			t.metrics.restores.Inc()
		}
	}
	return err
}

// restore replaces the state (with the applied index the snapshot holds):
// by swapping in the store an InstallSnapshot built (snapstore.go), or by
// building one from a stream.
func (t *trackedFSM) restore(rc io.ReadCloser) error {
	defer t.wake()
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	inst, ok, err := t.installs.preparedInstall(br)
	switch {
	case err != nil:
		return fmt.Errorf("restore snapshot: %w", err)
	case ok:
		return t.install(inst)
	}
	return t.Machine.Restore(br)
}

// install swaps in the store an InstallSnapshot built, unless the log
// could not continue from it (install.go).
func (t *trackedFSM) install(inst *builtInstall) error {
	plan, err := t.logs.planInstall(inst.index)
	if err != nil {
		inst.builder.Abort()
		return err
	}
	if err := t.Machine.Install(inst.builder); err != nil {
		return err
	}
	t.logs.installed(plan)
	t.log.Info("installed the leader's snapshot", "index", inst.index, "term", inst.term,
		"records", t.Machine.Meta().Records, "log_kept", plan.keepLog)
	return nil
}

func (t *trackedFSM) wake() {
	t.mu.Lock()
	defer t.mu.Unlock()
	close(t.changed)
	t.changed = make(chan struct{})
}

// Applied returns the index of the last entry the state machine applied.
func (t *trackedFSM) Applied() uint64 { return t.Machine.Applied() }

// waitApplied blocks until the state machine applied index or ctx ends.
func (t *trackedFSM) waitApplied(ctx context.Context, index uint64) error {
	for {
		t.mu.Lock()
		changed := t.changed
		t.mu.Unlock()
		if t.Applied() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
