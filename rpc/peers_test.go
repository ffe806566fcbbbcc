package rpc

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/idemnode/idemnode/cluster"
)

type fakeMembers struct {
	m     cluster.Membership
	err   error
	reads int
}

func (f *fakeMembers) Members() (cluster.Membership, error) {
	f.reads++
	return f.m, f.err
}

// TestPeerAddrs: every IP address of a member counts (gossip, Raft, gRPC,
// the Raft configuration's), a name or an unspecified address does not, an
// IPv4 address in IPv6 form is the same address, and the members are read
// once per refresh, not once per question.
func TestPeerAddrs(t *testing.T) {
	f := &fakeMembers{m: cluster.Membership{
		Members: []cluster.Member{
			{ID: "n1", Gossip: "10.0.0.1:7402", Raft: "10.0.1.1:7401", GRPC: "0.0.0.0:7400"},
			{ID: "n2", Gossip: "10.0.0.2:7402", Raft: "n2.example:7401", GRPC: "[fd00::2]:7400"},
		},
		Servers: []cluster.Voter{{ID: "n3", Address: "10.0.0.3:7401"}},
	}}
	isPeer := PeerAddrs(f)
	for addr, want := range map[string]bool{
		"10.0.0.1": true, "10.0.1.1": true, "10.0.0.2": true, "fd00::2": true, "10.0.0.3": true,
		"::ffff:10.0.0.1": true, "0.0.0.0": false, "10.0.0.9": false,
	} {
		if got := isPeer(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: peer %v, want %v", addr, got, want)
		}
	}
	if f.reads != 1 {
		t.Errorf("members read %d times in one refresh period, want 1", f.reads)
	}

	failing := &fakeMembers{err: errors.New("no raft")}
	isPeer = PeerAddrs(failing)
	for range 3 {
		if isPeer(netip.MustParseAddr("10.0.0.1")) {
			t.Fatal("an address is a peer's with no members known")
		}
	}
	if failing.reads != 1 {
		t.Errorf("a failing member list was read %d times in one refresh period, want 1", failing.reads)
	}
}
