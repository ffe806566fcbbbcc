package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/netfault"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// mustPartitioner returns a partitioner whose chain is addrs's, so that no
// other test, here or in another process, has a chain of that name.
func mustPartitioner(t *testing.T, addrs *testaddr.Block) *netfault.Partitioner {
	t.Helper()
	if err := netfault.Available(); err != nil {
		t.Skipf("partition test skipped: %v", err)
	}
	p, err := netfault.New(addrs.Chain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func ips(nodes []*testcluster.Node, except *testcluster.Node) []string {
	var out []string
	for _, nd := range nodes {
		if nd != except {
			out = append(out, nd.IP)
		}
	}
	return out
}

func followerOf(c *testcluster.Cluster, leader *testcluster.Node) *testcluster.Node {
	for _, nd := range c.Running() {
		if nd != leader {
			return nd
		}
	}
	return nil
}

// TestIsolatedNodeCannotCommitOrReadStale cuts one node off (Raft,
// forwarding and gossip alike, by address): writes sent to it fail within
// their deadline, and a linearizable read on it refuses rather than return
// the stale state it still holds. First a follower, then the leader.
func TestIsolatedNodeCannotCommitOrReadStale(t *testing.T) {
	skipInShort(t, "a 3-node cluster under partitions")
	t.Parallel()
	addrs := testaddr.New(t)
	p := mustPartitioner(t, addrs)
	c := testcluster.Start(t, 3, testcluster.Options{Addrs: addrs})
	for round, isolateLeader := range []bool{false, true} {
		leader := c.WaitLeader(30 * time.Second)
		victim := followerOf(c, leader)
		if isolateLeader {
			victim = leader
		}
		key := fmt.Sprintf("iso-%d", round)
		won := claimOn(t, victim, key, "holder")
		c.WaitConverged(10 * time.Second)

		if err := p.Isolate(victim.IP, ips(c.Nodes, victim)...); err != nil {
			t.Fatal(err)
		}
		majority := c.Nodes[0]
		if majority == victim {
			majority = c.Nodes[1]
		}
		// The cut reaches gossip: the majority sees the victim fail. A
		// suspicion that no other node confirms in time (their views of the
		// victim's incarnation can differ for a moment after a metadata
		// update) runs memberlist's longest timeout: 6 × 3 probe intervals
		// of the local profile, 18 s for three nodes; seen taking 22 s
		// with the whole suite running.
		testutil.Eventually(t, 40*time.Second, "gossip sees the victim fail", func() error {
			m, _ := majority.Node().Members()
			for _, mem := range m.Members {
				if mem.ID == victim.ID && mem.State != "alive" {
					return nil
				}
			}
			return fmt.Errorf("%s still alive in %s's view", victim.ID, majority.ID)
		})
		// The majority moves on: a new leader completes the key.
		ctx := ctxFor(t, 30*time.Second)
		out, err := majority.Client().Complete(ctx, &idempb.CompleteRequest{Id: id(key), Token: won.Token, Response: response("done")})
		if err != nil || out.Outcome != idempb.Outcome_OUTCOME_OK {
			t.Fatalf("complete on the majority: %v %v", out, err)
		}
		// The victim cannot commit, nor forward (the cut covers gRPC too).
		start := time.Now()
		wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = victim.Client().Claim(wctx, claimReq(key+"-w", "x"))
		cancel()
		if !isRetryable(err) {
			t.Fatalf("write to the isolated %s: got %v, want Unavailable or DeadlineExceeded", victim.ID, err)
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("write to the isolated node took %s, beyond its 3s deadline", took)
		}
		// It still holds the stale PENDING record locally...
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		stale, err := victim.Client().Get(sctx, &idempb.GetRequest{Id: id(key), Consistency: idempb.Consistency_CONSISTENCY_STALE})
		cancel()
		if err != nil || stale.Record.GetState() != idempb.State_STATE_PENDING {
			t.Fatalf("stale read on the isolated node: %v %v (want the old PENDING record)", stale, err)
		}
		// ...but a linearizable read refuses to serve it.
		lctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		lin, err := victim.Client().Get(lctx, &idempb.GetRequest{Id: id(key)})
		cancel()
		if err == nil {
			t.Fatalf("linearizable read on the isolated node answered %v", lin)
		}
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
		c.WaitLeader(30 * time.Second)
		c.WaitConverged(30 * time.Second)
	}
}

func claimOn(t *testing.T, nd *testcluster.Node, key, owner string) *idempb.ClaimResponse {
	t.Helper()
	resp, err := nd.Client().Claim(ctxFor(t, 10*time.Second), claimReq(key, owner))
	if err != nil || resp.Outcome != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim %s on %s: %v %v; the node's view then: %s", key, nd.ID, resp, err, viewOf(nd))
	}
	return resp
}

// viewOf says what nd knows of the cluster, so a failed call in a test says
// whether the node knew a leader, and how far it had committed and applied.
func viewOf(nd *testcluster.Node) string {
	node := nd.Node()
	if node == nil {
		return "stopped"
	}
	st := node.Status()
	return fmt.Sprintf("state=%s term=%d leader=%s (%s) commit=%d applied=%d",
		st.State, st.Term, st.LeaderID, st.LeaderAddr, st.CommitIndex, st.AppliedIndex)
}

// TestRestartAfterSnapshotsCatchesUp keeps a follower down while the leader
// snapshots and compacts its log several times; on restart the follower
// must be sent a snapshot (InstallSnapshot) and end with the leader's digest.
func TestRestartAfterSnapshotsCatchesUp(t *testing.T) {
	skipInShort(t, "crashes and restarts a node of a 3-node cluster")
	t.Parallel()
	// Each start of a node gets a registry of its own: the restarted
	// follower's counts its install.
	var regsMu sync.Mutex
	regs := map[string]*prometheus.Registry{}
	c := testcluster.Start(t, 3, testcluster.Options{Tune: func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 64
		cfg.SnapshotInterval = 100 * time.Millisecond
		cfg.TrailingLogs = 16
		regsMu.Lock()
		defer regsMu.Unlock()
		regs[cfg.NodeID] = prometheus.NewRegistry()
		cfg.Metrics = regs[cfg.NodeID]
	}})
	leader := c.WaitLeader(30 * time.Second)
	down := followerOf(c, leader)
	c.Crash(down)
	// The follower's log ends about here; the leader must compact past it.
	// Two writers keep group commit from folding the claims into a handful
	// of entries.
	crashedAt := leader.Node().Raft().LastIndex()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 320 {
				claimOn(t, leader, fmt.Sprintf("snap-%d-%d", w, i), "o")
			}
		}()
	}
	wg.Wait()
	testutil.Eventually(t, 20*time.Second, "leader snapshots past the follower's log", func() error {
		idx, _ := strconv.ParseUint(leader.Node().Raft().Stats()["last_snapshot_index"], 10, 64)
		if idx <= crashedAt+16+64 {
			return fmt.Errorf("last snapshot at %d, the follower stopped at %d", idx, crashedAt)
		}
		return nil
	})
	c.Restart(down)
	digest := c.WaitConverged(30 * time.Second)
	// An installed snapshot is a new store dir that CURRENT names.
	if cur, _ := os.ReadFile(filepath.Join(down.DataDir, "fsm", "CURRENT")); strings.TrimSpace(string(cur)) == "store-000001" {
		t.Fatalf("restarted follower still has its first store: it did not catch up by InstallSnapshot")
	}
	if got := down.Node().Status().Records; got != 640 {
		t.Fatalf("restarted follower holds %d records, want 640 (digest %.12s)", got, digest)
	}
	regsMu.Lock()
	reg := regs[down.ID]
	regsMu.Unlock()
	// The restore is counted just after the new state shows (the test can
	// see the digests converge first).
	testutil.Eventually(t, 5*time.Second, "the restore counted", func() error {
		restores, _ := gathered(t, reg, "idemnode_snapshot_restores_total")
		failures, n := gathered(t, reg, "idemnode_snapshot_failures_total")
		if restores < 1 || failures != 0 || n != 5 {
			return fmt.Errorf("restarted follower counted %v restores and %v failures over %d stages, want ≥ 1, 0 and 5", restores, failures, n)
		}
		return nil
	})
}

// gathered sums the values of name's series in reg, and counts them.
func gathered(t *testing.T, reg *prometheus.Registry, name string) (sum float64, series int) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				series++
			}
		}
	}
	return sum, series
}

// TestJoinAndRemoveFourthNode adds a server with --join (the leader makes it
// a voter) and removes it again through a follower's admin API.
func TestJoinAndRemoveFourthNode(t *testing.T) {
	skipInShort(t, "grows a 3-node cluster to four and back, crashing a node")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	fourth := c.AddNode()
	testutil.Eventually(t, 20*time.Second, "fourth node is a voter", func() error { return oneCluster(c) })
	claimOn(t, fourth, "via-fourth", "o")
	c.WaitConverged(10 * time.Second)

	// remove-member is for a server that is gone: a live one is refused
	// (the leader's reconciliation would add it straight back).
	_, err := c.Nodes[0].Admin().RemoveMember(ctxFor(t, 10*time.Second), &idempb.RemoveMemberRequest{Id: fourth.ID})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("remove-member of a live server: %v, want FailedPrecondition", err)
	}
	c.Crash(fourth)
	leader := c.WaitLeader(10 * time.Second)
	via := followerOf(c, leader)
	// Refused while gossip still sees it alive; accepted once it is dead.
	// memberlist declares a crashed node dead after its suspicion timeout,
	// up to ~20 s in a small cluster; give it room on a loaded machine.
	testutil.Eventually(t, 60*time.Second, "remove-member accepted", func() error {
		_, err := via.Admin().RemoveMember(ctxFor(t, 10*time.Second), &idempb.RemoveMemberRequest{Id: fourth.ID})
		if err != nil && status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("remove-member via %s: %v", via.ID, err)
		}
		return err
	})
	testutil.Eventually(t, 20*time.Second, "three voters again", func() error { return oneCluster(c) })
	claimOn(t, c.Nodes[0], "after-remove", "o")
}

// TestFiveNodesServeWithTwoDown crashes two of five servers, the leader
// among them; the other three keep a quorum and keep serving.
func TestFiveNodesServeWithTwoDown(t *testing.T) {
	skipInShort(t, "crashes two nodes of a 5-node cluster")
	t.Parallel()
	c := testcluster.Start(t, 5, testcluster.Options{})
	leader := c.WaitLeader(30 * time.Second)
	c.Crash(leader)
	c.Crash(followerOf(c, leader))
	c.WaitLeader(30 * time.Second)
	for i, nd := range c.Running() {
		claimOn(t, nd, fmt.Sprintf("five-%d", i), "o")
	}
	if len(c.Running()) != 3 {
		t.Fatalf("%d nodes running, want 3", len(c.Running()))
	}
}

// TestRollingRestartLosesNoWrite restarts every node in turn the way SIGTERM
// does (leadership transfer, gossip leave, draining in-flight calls) under a
// steady write load from a client with its own connection to every node. No
// acknowledged write is lost, and each restart costs the client at most one
// retryable error (the call that reaches the node as it stops).
func TestRollingRestartLosesNoWrite(t *testing.T) {
	skipInShort(t, "restarts every node of a 3-node cluster under writes")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	var apis []idempb.IdempotencyClient
	for _, nd := range c.Nodes {
		conn, err := grpc.NewClient(nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		apis = append(apis, idempb.NewIdempotencyClient(conn))
	}
	var restart atomic.Int32 // which restart is under way, for attributing errors
	var mu sync.Mutex        // guards acked and errs, written by the load goroutine
	var acked []string
	errs := map[int32][]error{}
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		// Like any client with a node list, it round-robins and stays away
		// from a node that failed it, until the next restart begins.
		down, window := map[int]bool{}, int32(-1)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := restart.Load()
			if r != window {
				down, window = map[int]bool{}, r
			}
			target := i % len(apis)
			for down[target] {
				target = (target + 1) % len(apis)
			}
			key := fmt.Sprintf("roll-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := apis[target].Claim(ctx, claimReq(key, "o"))
			cancel()
			mu.Lock()
			switch {
			case err != nil:
				down[target] = true
				errs[r] = append(errs[r], fmt.Errorf("%s via node%d: %w", key, target+1, err))
			case resp.Outcome == idempb.Outcome_OUTCOME_WON:
				acked = append(acked, key)
			}
			mu.Unlock()
		}
	}()
	for i, nd := range c.Nodes {
		before := ackedCount()
		restart.Store(int32(i))
		c.Leave(nd)
		c.Restart(nd)
		testutil.Eventually(t, 30*time.Second, nd.ID+" back as a voter", func() error { return oneCluster(c) })
		// A rolling restart moves on once the node serves again; here that
		// means the client's own connection to it works again.
		testutil.Eventually(t, 30*time.Second, nd.ID+" serves the client again", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := apis[i].Get(ctx, &idempb.GetRequest{Id: id("probe"), Consistency: idempb.Consistency_CONSISTENCY_STALE})
			return err
		})
		// The load must have run across this restart, not just before it.
		testutil.Eventually(t, 30*time.Second, "writes after restarting "+nd.ID, func() error {
			if n := ackedCount() - before; n < 20 {
				return fmt.Errorf("%d writes acknowledged since the restart began", n)
			}
			return nil
		})
	}
	close(stop)
	<-done
	total := 0
	for r, es := range errs {
		total += len(es)
		if len(es) > 1 {
			t.Errorf("restart of node%d: the client saw %d errors: %v", r+1, len(es), es)
		}
	}
	c.WaitConverged(30 * time.Second)
	ctx := ctxFor(t, 30*time.Second)
	for _, key := range acked {
		got, err := c.Nodes[0].Client().Get(ctx, &idempb.GetRequest{Id: id(key)})
		if err != nil || got.Outcome != idempb.Outcome_OUTCOME_OK {
			t.Fatalf("acknowledged %s lost: %v %v", key, got, err)
		}
	}
	t.Logf("%d writes acknowledged, %d retryable errors over %d restarts", len(acked), total, len(c.Nodes))
}

// TestDeadServerCleanup removes a crashed server from the Raft
// configuration once it has been dead for --dead-server-cleanup.
func TestDeadServerCleanup(t *testing.T) {
	skipInShort(t, "crashes a node of a 3-node cluster and waits for its removal")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Tune: func(cfg *cluster.Config) {
		cfg.DeadServerCleanup = time.Second
	}})
	leader := c.WaitLeader(30 * time.Second)
	victim := followerOf(c, leader)
	c.Crash(victim)
	testutil.Eventually(t, 30*time.Second, "dead server removed", func() error {
		m, err := leader.Node().Members()
		if err != nil {
			return err
		}
		for _, s := range m.Servers {
			if s.ID == victim.ID {
				return fmt.Errorf("%s still in the configuration", victim.ID)
			}
		}
		return nil
	})
	claimOn(t, leader, "after-cleanup", "o")
}

// TestWholeClusterMovesToNewAddresses stops every server and starts each
// again on a new IP (as pods rescheduled onto new nodes are): the Raft
// configuration still holds the old addresses, the transport finds the
// servers by id through gossip, a leader is elected and no data is lost.
func TestWholeClusterMovesToNewAddresses(t *testing.T) {
	skipInShort(t, "stops a 3-node cluster and restarts it on new addresses")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	claimOn(t, c.WaitLeader(30*time.Second), "before-move", "o")
	c.WaitConverged(10 * time.Second)
	for _, nd := range c.Nodes {
		c.Crash(nd)
	}
	for _, nd := range c.Nodes {
		nd.IP = c.Addrs.IP(20 + nd.Index)
	}
	for _, nd := range c.Nodes {
		c.Restart(nd)
	}
	leader := c.WaitLeader(60 * time.Second)
	claimOn(t, leader, "after-move", "o")
	c.WaitConverged(30 * time.Second)
	got, err := c.Nodes[0].Client().Get(ctxFor(t, 10*time.Second), &idempb.GetRequest{Id: id("before-move")})
	if err != nil || got.Outcome != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("record written before the move: %v %v", got, err)
	}
}
