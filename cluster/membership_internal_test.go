package cluster

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testutil"
)

// TestBadGossipAdvertisePortIsRefused: a --gossip-advertise whose port is
// not a port must stop the node at start with an error naming it, instead
// of advertising port 0 (or a wrapped-around number) that no peer can dial.
func TestBadGossipAdvertisePortIsRefused(t *testing.T) {
	for _, adv := range []string{"127.0.0.1:http", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1"} {
		m, err := newMembership(Config{NodeID: "n1", GossipAddr: "127.0.0.1:0", GossipAdvertise: adv, GossipProfile: "local"},
			memberMeta{Version: 1}, slog.Default())
		if err == nil {
			_ = m.shutdown()
			t.Errorf("advertise %q: started; want an error", adv)
			continue
		}
		if !strings.Contains(err.Error(), "gossip advertise") {
			t.Errorf("advertise %q: error %q does not name the gossip advertise address", adv, err)
		}
	}
}

// TestMetadataUpdatesDoNotRace: the bootstrap loop gossips in_cluster while
// the identity loop gossips the cluster identity, and memberlist's
// UpdateNode is not safe to call twice at once (it reads our own node's
// state outside its lock while another call rewrites it). Run under -race,
// as scripts/test.sh does: CI caught this race in a 3-node start.
func TestMetadataUpdatesDoNotRace(t *testing.T) {
	m, err := newMembership(Config{NodeID: "n1", GossipAddr: "127.0.0.1:0", GossipProfile: "local"},
		memberMeta{Version: 1}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer m.shutdown()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(2)
		go func() { defer wg.Done(); _ = m.setInCluster(i%2 == 0) }()
		go func() { defer wg.Done(); m.setIdentity(fmt.Sprintf("c%d", i), i%2 == 0) }()
	}
	wg.Wait()
}

// TestShutdownEndsAMetadataUpdate: memberlist waits for the broadcast of
// an update until its timeout and has no way out on shutdown. A node that
// is shutting down has stopped gossiping, so an update its identity or
// bootstrap loop made then waited out the whole 5 s, and Node.Close waited
// for both loops: a 3-node cluster sometimes took 10 s to stop.
func TestShutdownEndsAMetadataUpdate(t *testing.T) {
	addrs := testaddr.New(t)
	x, err := newMembership(Config{NodeID: "x", GossipAddr: addrs.IP(1) + ":0", GossipProfile: "local"},
		memberMeta{Version: 1, Raft: addrs.IP(1) + ":1"}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	y := mustMembership(t, "y", addrs.IP(2)+":0", nil)
	if _, err := x.list.Join([]string{y.list.LocalNode().Address()}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "x sees y", func() bool { return len(x.alive()) == 2 })
	// The first half of a shutdown: gossip stops, the peer still looks
	// alive, so the update waits for a broadcast that can no longer go out.
	if err := x.list.Shutdown(); err != nil {
		t.Fatal(err)
	}
	updated := make(chan error, 1)
	go func() { updated <- x.setInCluster(true) }()
	stopped := make(chan error, 1)
	go func() { stopped <- x.shutdown() }()
	select {
	case err := <-updated:
		if err == nil {
			t.Error("the update reported a broadcast that never went out")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the update still waits 2 s after the shutdown")
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}
