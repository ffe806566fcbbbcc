package cluster

import (
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
)

// gatedTransport is raft's network transport with a gate on the heartbeat
// fast path. raft runs heartbeats on the transport's connection goroutines,
// not its own, so Raft.Shutdown does not wait for one in flight: a heartbeat
// that passed raft's shutdown check can still be saving the term when the
// node closes its stores, and raft panics on the closed store ("failed to
// save current term: database not open", seen in CI). Closing the gate waits
// for the heartbeats in flight and drops later ones unanswered; the caller
// gets its answer from the transport's own shutdown.
//
// Every other RPC reaches raft through the gate's own consumer channel,
// where an AppendEntries has its commit index bounded first (commitclamp.go).
type gatedTransport struct {
	*raft.NetworkTransport
	mu     sync.RWMutex
	closed bool

	// rpcs is the channel raft consumes; forward fills it from the
	// network transport's, from raft's first call to Consumer until stop
	// is closed (Close).
	rpcs      chan raft.RPC
	stop      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
	// logs and log, when set (watchLog), report the requests whose commit
	// index the gate held back below entries the log holds.
	logs raft.LogStore
	log  *slog.Logger
}

func newGatedTransport(t *raft.NetworkTransport) *gatedTransport {
	return &gatedTransport{NetworkTransport: t, rpcs: make(chan raft.RPC), stop: make(chan struct{})}
}

// SetHeartbeatHandler installs fn behind the gate.
func (t *gatedTransport) SetHeartbeatHandler(fn func(raft.RPC)) {
	if fn == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.mu.RLock()
		defer t.mu.RUnlock()
		if !t.closed {
			fn(rpc)
		}
	})
}

// closeGate returns once no heartbeat is running and none will start. Call it
// after Raft.Shutdown (so a running heartbeat cannot block on raft) and before
// the stores close.
func (t *gatedTransport) closeGate() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}
