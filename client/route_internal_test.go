package client

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// silentNode listens on 127.0.0.1 and accepts connections but never
// speaks, so a Status call to it hangs until its context ends.
func silentNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-done; conn.Close() }()
		}
	}()
	return ln.Addr().String()
}

// clientGoroutines returns the stacks of goroutines other than the
// caller's that run the Client's methods.
func clientGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i > 0 && strings.Contains(g, "idemnode/client.(*Client)") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseStopsTheLeaderRefresh: a background refresh of the leader
// started before Close must be over when Close returns, not keep asking
// the nodes on a closed client.
func TestCloseStopsTheLeaderRefresh(t *testing.T) {
	node := silentNode(t)
	c, err := New(Config{Addrs: []string{node}, LeaderRefresh: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.leader, c.leaderAt = node, time.Now().Add(-time.Hour)
	c.mu.Unlock()
	if got := c.target(context.Background(), toLeader); got != node {
		t.Fatalf("target = %q, want the known leader %q", got, node)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// A goroutine that has signalled Close may still be on its way out
	// (runnable at its closing brace), so give it the moment to return; a
	// refresh still asking the silent node would stay for discoverTimeout (1 s).
	testutil.Eventually(t, 200*time.Millisecond, "the client's goroutines to return after Close", func() error {
		if left := clientGoroutines(); len(left) > 0 {
			return fmt.Errorf("%d goroutines still run the client:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		return nil
	})
}

// TestDiscoveryReportsWhyNoNodeAnswered: a discovery that reached no node
// says why instead of just finding no leader.
func TestDiscoveryReportsWhyNoNodeAnswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	c, err := New(Config{Addrs: []string{gone}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr, err := c.discover(context.Background())
	if addr != "" || err == nil || !strings.Contains(err.Error(), "Unavailable") {
		t.Fatalf("discover with no node up = %q, %v; want no leader and the Status error", addr, err)
	}
}
