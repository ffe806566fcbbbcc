package cluster

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// handshakePair is a listening and a dialing identity stream layer on
// loopback, each with the identity its test gives it.
type handshakePair struct {
	accept, dial *identityStreamLayer
	refusals     atomic.Int32
}

func newHandshakePair(t *testing.T, acceptID, dialID string) *handshakePair {
	t.Helper()
	p := &handshakePair{}
	refused := func(string, []byte, bool) { p.refusals.Add(1) }
	layer := func(id string) *identityStreamLayer {
		bound, err := newBoundStreamLayer("127.0.0.1:0", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bound.Close() })
		var b []byte
		if id != "" {
			b = []byte(id)
		}
		return &identityStreamLayer{StreamLayer: bound, local: func() []byte { return b }, refused: refused}
	}
	p.accept, p.dial = layer(acceptID), layer(dialID)
	return p
}

// exchange dials, sends what raft would send first and reads it on the
// accepting side; it returns the dial's error and what was read there.
func (p *handshakePair) exchange(t *testing.T) (dialErr error, got string, readErr error) {
	t.Helper()
	type read struct {
		got string
		err error
	}
	reads := make(chan read, 1)
	// The accepting side reads at once, as raft's per-connection
	// goroutine does: its first read answers the hello.
	go func() {
		c, err := p.accept.Accept()
		if err != nil {
			reads <- read{err: err}
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		reads <- read{string(buf), err}
	}()
	c, dialErr := p.dial.Dial(raft.ServerAddress(p.accept.Addr().String()), 2*time.Second)
	if c != nil {
		defer c.Close()
		c.Write([]byte{0, 'r', 'p', 'c'}) // rpcAppendEntries, then its body
	}
	select {
	case r := <-reads:
		return dialErr, r.got, r.err
	case <-time.After(3 * time.Second):
		t.Fatal("the accepting side read nothing")
	}
	return
}

// TestIdentityHandshake: both sides refuse a connection between two
// different identities; a node without one (joining empty, or a state
// from before identities) connects either way and sends raft's bytes
// unchanged, as an older release does.
func TestIdentityHandshake(t *testing.T) {
	for _, tc := range []struct {
		name, accept, dial string
		refused            bool
	}{
		{"same cluster", "cluster-a", "cluster-a", false},
		{"another cluster", "cluster-a", "cluster-b", true},
		{"the dialer has no identity", "cluster-a", "", false},
		{"the accepting node has no identity", "", "cluster-a", false},
		{"neither has one (older releases)", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newHandshakePair(t, tc.accept, tc.dial)
			dialErr, got, readErr := p.exchange(t)
			if !tc.refused {
				if dialErr != nil || readErr != nil || got != "\x00rpc" {
					t.Fatalf("dial %v, read %q %v: want raft's bytes through", dialErr, got, readErr)
				}
				return
			}
			if !errors.Is(dialErr, ErrOtherCluster) || !strings.Contains(dialErr.Error(), FormatClusterID([]byte(tc.accept))) {
				t.Fatalf("dial: %v, want a refusal naming the peer's identity", dialErr)
			}
			if readErr == nil {
				t.Fatalf("the accepting side read %q from another cluster", got)
			}
			if p.refusals.Load() != 2 {
				t.Fatalf("%d refusals reported, want one on each side", p.refusals.Load())
			}
		})
	}
}

// TestHelloFromAnotherReleaseIsRefused: a hello of an unknown version or
// an identity longer than any cluster's is refused, not taken for raft's.
func TestHelloFromAnotherReleaseIsRefused(t *testing.T) {
	for name, hello := range map[string]string{
		"unknown version":   helloMagic + "\x02\x01x",
		"identity too long": helloMagic + "\x01\x40" + strings.Repeat("x", 64),
		"not a hello":       "Ixyz\x01\x00",
		"cut short":         helloMagic[:2],
	} {
		t.Run(name, func(t *testing.T) {
			p := newHandshakePair(t, "cluster-a", "")
			go func() {
				c, err := net.Dial("tcp", p.accept.Addr().String())
				if err == nil {
					c.Write([]byte(hello))
					time.Sleep(100 * time.Millisecond)
					c.Close()
				}
			}()
			c, err := p.accept.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := c.Read(make([]byte, 16)); err == nil {
				t.Fatalf("read %d bytes of a bad hello as raft's", n)
			}
		})
	}
}

// TestLeaderAdmits is the leader's rule for adding a voter: the same
// identity or an empty state; before the cluster has an identity, anyone.
func TestLeaderAdmits(t *testing.T) {
	member := func(cluster string, state bool, applies int) Member {
		return Member{ID: "x", Cluster: cluster, HasState: state, Applies: applies}
	}
	for _, tc := range []struct {
		name   string
		ours   string
		m      Member
		admits bool
	}{
		{"same identity", "aa", member("aa", true, 4), true},
		{"empty state", "aa", member("", false, 4), true},
		{"another identity", "aa", member("bb", true, 4), false},
		{"state without identity", "aa", member("", true, 4), false},
		{"an older release", "aa", member("", false, 3), false},
		{"this cluster has no identity yet", "", member("bb", true, 3), true},
	} {
		err := admits(tc.ours, tc.m)
		if (err == nil) != tc.admits {
			t.Errorf("%s: admits %v (%v), want %v", tc.name, err == nil, err, tc.admits)
		}
		if err != nil && !strings.Contains(err.Error(), "wipe") && !strings.Contains(err.Error(), "upgrade") {
			t.Errorf("%s: the refusal does not say what to do: %v", tc.name, err)
		}
	}
}

// TestIdentityWaitsForTheUpgradeToEnd: the identity is held back while a
// server of an older release is alive or gone only a little while (the
// last node of a rolling upgrade, stopped and removed, must be able to come
// back), and while a server holding state without an identity waits
// outside the configuration to be added.
func TestIdentityWaitsForTheUpgradeToEnd(t *testing.T) {
	now := time.Now()
	newNode := Member{ID: "b", State: "alive", Applies: 4, HasState: true}
	for _, tc := range []struct {
		name     string
		m        Member
		inConfig bool
		held     bool
	}{
		{"every member upgraded", newNode, true, false},
		{"an old member alive", Member{ID: "b", State: "alive", Applies: 3}, true, true},
		{"an old member that left a minute ago", Member{ID: "b", State: "left", Applies: 3, Since: now.Add(-time.Minute)}, false, true},
		{"an old member gone for an hour", Member{ID: "b", State: "dead", Applies: 3, Since: now.Add(-time.Hour)}, false, false},
		{"upgraded, back with state, not yet re-added", newNode, false, true},
		{"upgraded and empty, not yet added", Member{ID: "b", State: "alive", Applies: 4}, false, false},
	} {
		inConfig := map[string]bool{"a": true, "b": tc.inConfig}
		why := identityHeldBack([]Member{{ID: "a", State: "alive", Applies: 4, HasState: true}, tc.m}, inConfig, "a", now)
		if (why != "") != tc.held {
			t.Errorf("%s: held back %q, want held %v", tc.name, why, tc.held)
		}
	}
}
