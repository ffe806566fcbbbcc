package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// mustCluster starts three plaintext servers that form one cluster
// (--bootstrap-expect 3, each joining the others), with extra added to
// their serve flags, and waits until every one is ready.
func mustCluster(t *testing.T, extra ...string) []*server {
	t.Helper()
	nodes := make([]*server, 3)
	for i := range nodes {
		nodes[i] = newServer(t, nil, nil)
		nodes[i].nodeID = "n" + string(rune('1'+i))
	}
	return launchCluster(nodes, extra)
}

// launchCluster starts the prepared nodes as one cluster (--bootstrap-expect
// with their number, each joining the others), with extra added to their
// serve flags, and waits until every one is ready.
func launchCluster(nodes []*server, extra []string) []*server {
	for i, n := range nodes {
		n.serveFlags = append(append([]string{"--insecure"}, clusterFlags(nodes, i)...), extra...)
		n.launch()
	}
	for _, n := range nodes {
		n.waitReady()
	}
	return nodes
}

// clusterFlags are the serve flags that make node i one of nodes: each
// expects them all and joins the others.
func clusterFlags(nodes []*server, i int) []string {
	var join []string
	for j, o := range nodes {
		if j != i {
			join = append(join, o.gossip)
		}
	}
	return []string{"--bootstrap-expect", fmt.Sprint(len(nodes)), "--join", strings.Join(join, ","), "--gossip-profile", "local"}
}

// TestCLIAgainstCluster: transfer-leadership prints the new leader, the
// CLI works through a dead first endpoint, and with two of three nodes
// dead a claim says the cluster has no quorum.
func TestCLIAgainstCluster(t *testing.T) {
	t.Parallel()
	nodes := mustCluster(t)
	var st map[string]any
	nodes[0].cliJSON(exitOK, &st, "status")
	leader, _ := st["leader_id"].(string)
	var follower *server
	for _, n := range nodes {
		if n.nodeID != leader {
			follower = n
		}
	}
	dead := testutil.FreeAddr(t)
	stdout, stderr, code := cli(t, "transfer-leadership", "--addr", dead+","+follower.grpc, "--to", follower.nodeID)
	want := "outcome: ok\nleader_id: " + follower.nodeID + "\nleader_addr: " + follower.grpc + "\n"
	if code != exitOK || stdout != want {
		t.Fatalf("transfer-leadership from %s to %s: exit %d, stdout %q, stderr %q; want %q", leader, follower.nodeID, code, stdout, stderr, want)
	}

	for _, n := range nodes {
		if n != follower {
			n.kill()
		}
	}
	testutil.Eventually(t, 45*time.Second, "a claim to say the cluster has no quorum", func() bool {
		_, stderr, code := cli(t, "claim", "--no-fingerprint", "--addr", follower.grpc, "--key", "k", "--owner", "o", "--timeout", "2s")
		if code == exitRetry && strings.Contains(stderr, "no leader: the cluster has no quorum (2 of 3 nodes unreachable)") {
			return true
		}
		t.Logf("claim with two nodes dead: exit %d, stderr %q", code, stderr)
		return false
	})
}
