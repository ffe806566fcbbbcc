package rpc

import (
	"testing"

	"google.golang.org/grpc/connectivity"
)

// TestForwarderDropsADepartedLeaderAddress: once calls go to a new leader
// address, the connection and stream to the old one are closed and
// forgotten after the idle grace, so a departed address is not pinged and
// redialled for ever; a call still in flight on the old one is not cut.
func TestForwarderDropsADepartedLeaderAddress(t *testing.T) {
	oldAddr := startEchoLeader(t, &echoLeader{})
	newAddr := startEchoLeader(t, &echoLeader{})
	f := &forwarder{idleAfter: 1} // every connection is past the grace at once
	t.Cleanup(f.close)
	if _, err := f.link(oldAddr); err != nil {
		t.Fatal(err)
	}
	oldConn, err := f.conn(oldAddr)
	if err != nil {
		t.Fatal(err)
	}

	inFlight := f.begin(oldAddr) // a call forwarded to the old leader, not answered yet
	f.begin(newAddr)()
	if !f.keeps(oldAddr) || oldConn.GetState() == connectivity.Shutdown {
		t.Fatal("the old leader's connection was closed under a call in flight")
	}

	inFlight()
	f.begin(newAddr)()
	if f.keeps(oldAddr) {
		t.Error("the old leader's connection or forwarding stream is still kept")
	}
	if st := oldConn.GetState(); st != connectivity.Shutdown {
		t.Errorf("the old leader's connection is %v, want %v", st, connectivity.Shutdown)
	}
}

// keeps reports whether f holds a connection or a stream to addr.
func (f *forwarder) keeps(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, conn := f.conns[addr]
	_, link := f.links[addr]
	return conn || link
}
