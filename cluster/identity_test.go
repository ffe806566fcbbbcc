package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestNodeOfAnotherClusterIsRefused is the attack of issue 42 (finding 1):
// a backup of one cluster, restored into a node that joins a second, live
// cluster, was added as a voter, and after a leadership transfer to it a
// key PENDING in the live cluster was claimed again. Now the restored node
// refuses to join (it holds another cluster's identity), the leader does
// not add it, and when it is added by hand all the same, Raft refuses
// every connection between them: leadership cannot move to it, the key
// stays in progress, and the foreign node's state is untouched. A data dir
// of the other cluster reused as it is takes the same path.
func TestNodeOfAnotherClusterIsRefused(t *testing.T) {
	skipInShort(t, "two 3-node clusters, a backup of one restored into a node of the other")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitLeader(30 * time.Second)
	ours := waitIdentity(t, c.Nodes...)
	claimOn(t, leader, "pending-key", "holder")

	// Another cluster, a single node whose log runs past the live one's.
	otherDir := t.TempDir()
	other := openSolo(t, soloConfig(otherDir, c.Addrs.IP(50)))
	ctx := ctxFor(t, time.Minute)
	for i := range 60 {
		if err := put(ctx, other, fmt.Sprintf("other-%d", i), []byte("other")); err != nil {
			t.Fatal(err)
		}
	}
	theirs := other.ClusterID()
	if theirs == "" || theirs == ours {
		t.Fatalf("the other cluster's identity %q (ours %q)", theirs, ours)
	}
	var backup bytes.Buffer
	if _, err := other.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	other.Close()

	t.Run("restored from a backup", func(t *testing.T) {
		nd := c.NewNode()
		info, err := cluster.RestoreBackup(nd.DataDir, nd.ID, nd.RaftAddr(), &backup)
		if err != nil {
			t.Fatal(err)
		}
		if info.Cluster == "" || info.Cluster == theirs || info.Cluster == ours {
			t.Fatalf("a restore must seed a new cluster: identity %q (backed up %q, live %q)", info.Cluster, theirs, ours)
		}
		refusedEverywhere(t, c, leader, nd, info.Digest)
	})
	t.Run("its data dir reused", func(t *testing.T) {
		nd := c.NewNode()
		nd.DataDir = otherDir
		refusedEverywhere(t, c, leader, nd, "")
	})
}

// refusedEverywhere starts nd (holding another cluster's state) joined to
// c and checks every refusal; digest, when set, is the state nd must keep.
func refusedEverywhere(t *testing.T, c *testcluster.Cluster, leader, nd *testcluster.Node, digest string) {
	t.Helper()
	c.Join(nd)
	foreign := nd.Node()
	if digest == "" {
		digest = foreign.Status().Digest
	}
	select {
	case err := <-foreign.Fatal():
		if !errors.Is(err, cluster.ErrOtherCluster) {
			t.Fatalf("the joining node stopped for another reason: %v", err)
		}
		t.Logf("the joining node refuses: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("a node holding another cluster's state joined a live cluster and did not refuse")
	}
	// The leader reconciles every 200 ms: give it ten rounds.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if inConfiguration(t, leader, nd.ID) {
			t.Fatalf("the leader added %s, which holds another cluster's state", nd.ID)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Whatever reconcile decides: added by hand, Raft still refuses it.
	lead := leader.Node()
	if err := lead.Raft().AddVoter(raft.ServerID(nd.ID), raft.ServerAddress(nd.RaftAddr()), 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("add voter by hand: %v", err)
	}
	t.Cleanup(func() { lead.Raft().RemoveServer(raft.ServerID(nd.ID), 0, 10*time.Second) })
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lead.TransferLeadership(tctx, nd.ID); err == nil {
		t.Fatalf("leadership moved to %s, which holds another cluster's state", nd.ID)
	}
	if got := c.WaitLeader(30 * time.Second); got.ID == nd.ID {
		t.Fatalf("%s leads the cluster", nd.ID)
	}
	resp, err := c.WaitLeader(30*time.Second).Client().Claim(ctxFor(t, 10*time.Second), claimReq("pending-key", "thief"))
	if err != nil || resp.Outcome != idempb.Outcome_OUTCOME_IN_PROGRESS {
		t.Fatalf("the key PENDING in the live cluster answered %v, %v; want in progress", resp.GetOutcome(), err)
	}
	if st := foreign.Status(); st.Digest != digest || st.Cluster == leader.Node().ClusterID() {
		t.Fatalf("the foreign node's state changed: digest %s (was %s), identity %s", st.Digest, digest, st.Cluster)
	}
	if err := lead.Raft().RemoveServer(raft.ServerID(nd.ID), 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("remove %s: %v", nd.ID, err)
	}
	c.Crash(nd)
}

// waitIdentity waits until every node holds the same cluster identity,
// and returns it.
func waitIdentity(t *testing.T, nodes ...*testcluster.Node) string {
	t.Helper()
	var id string
	testutil.Eventually(t, 20*time.Second, "one cluster identity on every node", func() error {
		id = nodes[0].Node().ClusterID()
		for _, nd := range nodes {
			if got := nd.Node().ClusterID(); got == "" || got != id {
				return fmt.Errorf("%s holds identity %q, %s holds %q", nd.ID, got, nodes[0].ID, id)
			}
		}
		return nil
	})
	return id
}

func inConfiguration(t *testing.T, nd *testcluster.Node, id string) bool {
	t.Helper()
	m, err := nd.Node().Members()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(m.Servers, func(s cluster.Voter) bool { return s.ID == id })
}
