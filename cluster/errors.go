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
	// ErrUpgrading refuses a command that a voter's release cannot apply:
	// it would stop that node. Finish the rolling upgrade first.
	ErrUpgrading = errors.New("a voter runs an older release that cannot apply this command; finish the upgrade first")
	// ErrDataDir means the data dir does not take writes (read-only, full,
	// no permission): the node refuses to start on it.
	ErrDataDir = errors.New("data dir unusable")
	// ErrDataDirInUse means another process (another node) runs on the
	// data dir: two nodes on one dir would corrupt it.
	ErrDataDirInUse = errors.New("data dir in use")
	// ErrCorrupt means the log or a snapshot in the data dir does not read
	// back as written. The node refuses to start rather than serve state
	// that differs from its peers'; the remedy is to wipe the data dir and
	// let the node rejoin, which copies the state from the leader.
	ErrCorrupt = errors.New("corrupt")
	// ErrStorageFault is what Config.OnFatal receives: the disk failed a
	// Raft log write or a store read or write, or a log write stalled. The
	// node must stop; a restart recovers what is on disk.
	ErrStorageFault = errors.New("storage fault")
)
