package cluster

import "github.com/hashicorp/raft"

// await waits for f to resolve, or for the node to stop, and then returns
// ErrShutdown. Raft answers a future on apply, on lost leadership and on
// most paths of its shutdown, but not all: a committed batch still queued
// for the state machine when raft shuts down is dropped unanswered (runFSM
// returns without draining its queue), and the futures of Apply, AddVoter
// and RemoveServer carry no shutdown channel (hashicorp/raft#498, open in
// v1.7.3). A node goroutine that waited on such a future alone held Close
// forever (TestCloseUnderLoadReturns). The helper goroutine costs one spawn
// per log entry, not per command; the few whose future raft dropped stay
// blocked after Close, holding nothing but the future.
func (n *Node) await(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stop:
		return ErrShutdown
	}
}
