package cluster

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestHeartbeatGateWaitsForHeartbeatsInFlight: closing the gate waits for a
// running heartbeat, and no heartbeat reaches raft after it, so the node can
// close raft's stores without a heartbeat writing to them.
func TestHeartbeatGateWaitsForHeartbeatsInFlight(t *testing.T) {
	server := newTestTransport(t)
	gate := newGatedTransport(server)
	entered, release := make(chan struct{}, 4), make(chan struct{})
	gate.SetHeartbeatHandler(func(rpc raft.RPC) {
		entered <- struct{}{}
		<-release
		rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
	})
	client := newTestTransport(t)
	heartbeat := func() error {
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte(client.LocalAddr())}, Term: 1}
		return client.AppendEntries("server", server.LocalAddr(), req, &raft.AppendEntriesResponse{})
	}

	first := make(chan error, 1)
	go func() { first <- heartbeat() }()
	<-entered
	closed := make(chan struct{})
	go func() { gate.closeGate(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("closeGate returned while a heartbeat was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if err := <-first; err != nil {
		t.Fatalf("heartbeat in flight: %v", err)
	}

	late := make(chan error, 1)
	go func() { late <- heartbeat() }()
	time.Sleep(100 * time.Millisecond)
	server.Close()
	if err := <-late; err == nil {
		t.Fatal("a heartbeat after the gate closed was answered")
	}
	if len(entered) != 0 {
		t.Fatal("a heartbeat after the gate closed reached the handler")
	}
}

func newTestTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
