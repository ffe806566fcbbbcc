package cluster_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testpki"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestTLSClusterForwardsOverMutualTLS: a cluster whose every port is TLS
// (client certificates required, peers on mutual TLS, gossip encrypted)
// forms, and a claim sent to a follower is forwarded to the leader and wins.
func TestTLSClusterForwardsOverMutualTLS(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Security: testcluster.NewSecurity(t)})
	testutil.Eventually(t, 10*time.Second, "one cluster", func() error { return oneCluster(c) })
	leader := c.WaitLeader(10 * time.Second)
	ctx := ctxFor(t, 10*time.Second)
	for _, nd := range c.Nodes {
		if nd == leader {
			continue
		}
		resp, err := nd.Client().Claim(ctx, claimReq("via-"+nd.ID, "o1"))
		if err != nil || resp.Outcome != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("claim on follower %s: %v %v", nd.ID, resp, err)
		}
	}
	c.WaitConverged(10 * time.Second)
}

// TestStrangersAreShutOut: a node whose certificate is not of the cluster
// CA never becomes a voter (though it knows the gossip key), nodes with the
// wrong gossip key or none are never heard, and a raw Raft connection with a
// bad certificate or none is refused; a proper node joining after them all
// is added, and the cluster keeps serving.
func TestStrangersAreShutOut(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.Start(t, 3, testcluster.Options{Security: sec})
	leader := c.WaitLeader(10 * time.Second)

	stranger := c.NewNode()
	stranger.Issuer = testpki.NewCA(t, "stranger CA")
	c.Join(stranger)
	wrongKey := c.NewNode()
	wrongKey.GossipKeys = [][]byte{testpki.GossipKey(t)}
	c.Join(wrongKey)
	plainGossip := c.NewNode()
	plainGossip.GossipKeys = [][]byte{}
	c.Join(plainGossip)

	// The stranger has the gossip key: the leader sees it, and would add it.
	testutil.Eventually(t, 10*time.Second, "the leader sees the stranger", func() error {
		return inGossip(leader.Node(), stranger.ID)
	})
	// A proper node joins last; once it is a voter, the leader has
	// reconciled after seeing the stranger, more than once.
	proper := c.AddNode()
	testutil.Eventually(t, 20*time.Second, "the proper node becomes a voter", func() error {
		return isVoter(leader.Node(), proper.ID)
	})
	for _, nd := range c.Nodes[:3] {
		m, err := nd.Node().Members()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Servers {
			if s.ID == stranger.ID {
				t.Errorf("%s: the stranger is in the Raft configuration", nd.ID)
			}
		}
		for _, mem := range m.Members {
			if mem.ID == wrongKey.ID || mem.ID == plainGossip.ID {
				t.Errorf("%s: gossip lists %s (state %s), which has the wrong key or none", nd.ID, mem.ID, mem.State)
			}
		}
		// The leader made it a voter on its own gossip view; the others
		// hear of it a few probe intervals later.
		testutil.Eventually(t, 10*time.Second, nd.ID+" sees the proper node in gossip", func() error {
			return inGossip(nd.Node(), proper.ID)
		})
	}

	// Raw Raft RPCs: refused without a certificate of the cluster CA,
	// answered with one (the control).
	strangerCert := stranger.Issuer.Issue(t, "probe", leader.IP).TLS(t)
	properCert := sec.CA.Issue(t, "probe", leader.IP).TLS(t)
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"plaintext", nil, false},
		{"no client certificate", &tls.Config{RootCAs: sec.CA.Pool(), ServerName: "idemnode-peer", InsecureSkipVerify: true}, false},
		{"certificate of another CA", &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{strangerCert}}, false},
		{"certificate of the cluster CA", &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{properCert}}, true},
	} {
		err := raftProbe(t, leader.RaftAddr(), tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%s: RequestVote error %v, want success %v", tc.name, err, tc.ok)
		}
	}

	ctx := ctxFor(t, 10*time.Second)
	if resp, err := proper.Client().Claim(ctx, claimReq("after-strangers", "o1")); err != nil || resp.Outcome != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim after the strangers: %v %v", resp, err)
	}
}

// raftProbe sends one RequestVote of term 0 (which no node grants, so the
// cluster is undisturbed) to a Raft address over plaintext or TLS, and
// returns the transport's error. A TLS 1.3 server refuses a client
// certificate after the client's handshake has completed, so the refusal
// arrives as an error reading the answer.
func raftProbe(t *testing.T, addr string, cfg *tls.Config) error {
	ln, err := net.Listen("tcp", testaddr.New(t).IP(1)+":0")
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(dialLayer{ln, cfg}, 1, 3*time.Second, io.Discard)
	defer trans.Close()
	req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax,
		ID: []byte("probe"), Addr: []byte(ln.Addr().String())}}
	return trans.RequestVote("leader", raft.ServerAddress(addr), req, &raft.RequestVoteResponse{})
}

// dialLayer is a raft stream layer that dials with cfg (plain when nil).
type dialLayer struct {
	net.Listener
	cfg *tls.Config
}

func (d dialLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if d.cfg == nil {
		return net.DialTimeout("tcp", string(addr), timeout)
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), d.cfg)
}

// TestGossipKeyRotationWhileRunning rotates the gossip key of a running
// cluster in the three rounds docs/SECURITY.md gives, every node in turn:
// nobody drops out, a node with only the new key joins, and one with only
// the retired key is no longer heard.
func TestGossipKeyRotationWhileRunning(t *testing.T) {
	skipInShort(t, "rotates the gossip key of a 3-node cluster in three rounds, nodes joining")
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	a, b := sec.GossipKeys[0], testpki.GossipKey(t)
	c := testcluster.Start(t, 3, testcluster.Options{Security: sec})
	leader := c.WaitLeader(10 * time.Second)
	for _, ring := range [][][]byte{{a, b}, {b, a}, {b}} {
		for _, nd := range c.Nodes {
			if err := nd.Node().SetGossipKeys(ring); err != nil {
				t.Fatal(err)
			}
			if got := nd.Node().GossipKeys(); !slices.EqualFunc(got, ring, slices.Equal) {
				t.Fatalf("%s: keyring %x after SetGossipKeys(%x)", nd.ID, got, ring)
			}
		}
		if err := allAlive(c.Nodes...); err != nil {
			t.Fatalf("after keyring %x: %v", ring, err)
		}
	}
	retired := c.NewNode()
	retired.GossipKeys = [][]byte{a}
	c.Join(retired)
	fresh := c.NewNode()
	fresh.GossipKeys = [][]byte{b}
	c.Join(fresh)
	testutil.Eventually(t, 20*time.Second, "the node with the new key becomes a voter", func() error {
		return isVoter(leader.Node(), fresh.ID)
	})
	if err := inGossip(leader.Node(), retired.ID); err == nil {
		t.Error("a node with only the retired key is heard")
	}
	// The leader hears of the fresh node first; the others learn of it by
	// gossip a few probe intervals later.
	testutil.Eventually(t, 20*time.Second, "every node sees the fresh one alive", func() error {
		return allAlive(append(c.Nodes[:3:3], fresh)...)
	})
}

// allAlive checks that the nodes all see each other alive.
func allAlive(nodes ...*testcluster.Node) error {
	n := len(nodes)
	for _, nd := range nodes {
		m, err := nd.Node().Members()
		if err != nil {
			return err
		}
		alive := 0
		for _, mem := range m.Members {
			if mem.State == "alive" && slices.ContainsFunc(nodes, func(o *testcluster.Node) bool { return o.ID == mem.ID }) {
				alive++
			}
		}
		if alive != n {
			return fmt.Errorf("%s sees %d of %d alive: %+v", nd.ID, alive, n, m.Members)
		}
	}
	return nil
}

func inGossip(node *cluster.Node, id string) error {
	m, err := node.Members()
	if err != nil {
		return err
	}
	for _, mem := range m.Members {
		if mem.ID == id && mem.State == "alive" {
			return nil
		}
	}
	return fmt.Errorf("%s is not alive in gossip", id)
}

func isVoter(node *cluster.Node, id string) error {
	m, err := node.Members()
	if err != nil {
		return err
	}
	for _, s := range m.Servers {
		if s.ID == id && s.Voter {
			return nil
		}
	}
	return fmt.Errorf("%s is not a voter", id)
}
