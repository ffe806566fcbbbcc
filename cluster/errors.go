package cluster

import "errors"

// Sentinel errors of the cluster boundary. raft's own errors are translated
// into these so that rpc/ maps one set of errors to gRPC codes.
var (
	// ErrNotLeader means this node cannot decide the request; the caller
	// (or the forwarder) should send it to the leader.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader means no leader is known within the request's deadline.
	ErrNoLeader = errors.New("no leader")
	// ErrShutdown means the node is closing.
	ErrShutdown = errors.New("node is shutting down")
	// ErrTimeout means raft did not commit the command within the deadline;
	// the command may still be applied later (an indeterminate outcome).
	ErrTimeout = errors.New("timed out waiting for commit")
	// ErrUnknownServer means no server with that id is in the configuration.
	ErrUnknownServer = errors.New("unknown server")
	// ErrMemberAlive refuses to remove a server that gossip sees alive: the
	// leader would add it straight back. Stop it first (SIGTERM makes it
	// leave, which removes it).
	ErrMemberAlive = errors.New("server is alive")
)
