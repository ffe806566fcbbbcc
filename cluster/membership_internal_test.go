package cluster

import (
	"log/slog"
	"strings"
	"testing"
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
