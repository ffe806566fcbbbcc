package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// termStart records the first entry a leader applied in its term. Until it
// is applied, the leader's commit index may lag what an earlier leader
// committed, so linearizable reads wait for it (Raft §6.4).
type termStart struct {
	term  uint64
	index uint64
}

// leaderState is the per-term readiness of this node as leader.
type leaderState struct {
	ready atomic.Pointer[termStart]

	// mu guards changed and stopped. changed is closed and replaced at every
	// change of this node's leadership, so any number of waiters learn of it
	// without polling (see LeaderChanged); once stopped it stays closed.
	mu      sync.Mutex
	changed chan struct{}
	stopped bool
}

// changedCh returns the channel closed at the next leadership change.
func (l *leaderState) changedCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// signalChange wakes every holder of the current channel; after stop, the
// channel stays closed.
func (l *leaderState) signalChange(stop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if l.changed != nil {
		close(l.changed)
	}
	l.changed, l.stopped = make(chan struct{}), stop
	if stop {
		close(l.changed)
	}
}

// LeaderChanged returns a channel that is closed at the next change of this
// node's own leadership (gained or lost) and when the node stops. To learn
// whether a leader's term is still running, take the channel first and then
// check that the node is leader: raft clears its leader before it reports
// the loss, so a loss between the two steps is seen by one or the other.
func (n *Node) LeaderChanged() <-chan struct{} { return n.leader.changedCh() }

// watchLeadership reacts to raft's leadership notifications: on gaining
// leadership it commits a no-op state-machine command (Expire with limit 0
// and no time, so it changes nothing, not even FSM time), which marks the
// term's start for reads.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			n.leader.signalChange(true)
			return
		case isLeader := <-n.leaderNotify:
			n.leader.signalChange(false)
			n.metrics.leaderChanges.Inc()
			if isLeader {
				n.log.Info("became leader", "term", n.raft.CurrentTerm())
				n.establishTerm()
			} else {
				n.log.Info("lost leadership")
			}
		}
	}
}

// establishTerm commits the term's first command, retrying while this node
// stays leader.
func (n *Node) establishTerm() {
	for n.raft.State() == raft.Leader {
		term := n.raft.CurrentTerm()
		f := n.raft.Apply(fsm.EncodeCommand(&fsm.Command{Type: fsm.TypeExpire}), 5*time.Second)
		if err := n.await(context.Background(), f); err == nil {
			n.leader.ready.Store(&termStart{term: term, index: f.Index()})
			return
		}
		select {
		case <-n.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LinearizableBarrier returns once the local state machine reflects every
// write committed before the call: the node confirms with a quorum that it
// is still leader (one confirmation shared by concurrent reads, see
// confirmer), then waits until it has applied the commit index it saw at
// the start. A follower gets ErrNotLeader and must forward the read.
func (n *Node) LinearizableBarrier(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	ts, err := n.waitTermStart(ctx)
	if err != nil {
		return err
	}
	readIndex := max(n.raft.CommitIndex(), ts.index)
	if err := n.reads.wait(ctx); err != nil {
		return err
	}
	if n.raft.CurrentTerm() != ts.term {
		// Leadership was lost and won again meanwhile: the read index
		// belongs to the old term. The caller retries.
		return ErrNotLeader
	}
	return n.fsm.waitApplied(ctx, readIndex)
}

// waitTermStart waits until this leader committed its term's first entry.
func (n *Node) waitTermStart(ctx context.Context) (*termStart, error) {
	var ts *termStart
	err := n.waitFor(ctx, func() bool {
		ts = n.leader.ready.Load()
		return n.raft.State() != raft.Leader || (ts != nil && ts.term == n.raft.CurrentTerm())
	})
	if err != nil {
		return nil, err
	}
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	return ts, nil
}
