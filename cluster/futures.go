package cluster

import (
	"context"

	"github.com/hashicorp/raft"
)

// await waits for f to resolve and returns its error; it returns ErrShutdown
// instead if the node stops first, or ctx's error if ctx ends first.
//
// Raft does not answer every future when it shuts down. A batch it commits
// as it shuts down can still be queued for the state machine after runFSM
// has stopped reading (the send and shutdownCh are one select, picked at
// random, and runFSM returns without draining the queue), and the futures
// of Apply, AddVoter and RemoveServer have no shutdown channel of their own
// to fall back on (raft v1.7.3; hashicorp/raft#498 reports the same hang
// from the caller's side). VerifyLeader and LeadershipTransfer can likewise
// be left in a buffered channel that the leader loop no longer reads. A
// node goroutine that waited on such a future alone held Close forever
// (TestCloseUnderLoadReturns). The helper goroutine costs one spawn per
// log entry, not per command; one whose future raft dropped stays blocked
// after Close, holding the future and its entry.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stop:
		return ErrShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
}
