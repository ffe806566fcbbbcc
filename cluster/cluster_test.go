package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

func id(key string) *idempb.RecordId {
	return &idempb.RecordId{Tenant: "t1", Scope: "POST /v1/charges", Key: key}
}

func claimReq(key, owner string) *idempb.ClaimRequest {
	return &idempb.ClaimRequest{Id: id(key), Fingerprint: []byte("fp-" + key), Owner: owner,
		Lease: durationpb.New(time.Minute)}
}

func response(body string) *idempb.Response {
	return &idempb.Response{Status: 201, Headers: []*idempb.Header{{Name: "Content-Type", Value: "application/json"},
		{Name: "Set-Cookie", Value: "a=1"}, {Name: "Set-Cookie", Value: "b=2"}}, Body: []byte(body)}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestBootstrapExpectFormsOneCluster(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	testutil.Eventually(t, 10*time.Second, "one cluster", func() error { return oneCluster(c) })
	ctx := ctxFor(t, 10*time.Second)
	for _, nd := range c.Nodes {
		resp, err := nd.Client().Claim(ctx, claimReq("k-"+nd.ID, "o1"))
		if err != nil || resp.Outcome != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("claim via %s: %v %v", nd.ID, resp, err)
		}
	}
	c.WaitConverged(10 * time.Second)
}

// oneCluster reports whether every running node holds a Raft configuration
// of all running nodes and all agree on one leader.
func oneCluster(c *testcluster.Cluster) error {
	leaders := map[string]bool{}
	for _, nd := range c.Running() {
		m, err := nd.Node().Members()
		if err != nil {
			return err
		}
		if len(m.Servers) != len(c.Running()) {
			return fmt.Errorf("%s: %d servers in raft configuration", nd.ID, len(m.Servers))
		}
		l, _ := nd.Node().Leader()
		leaders[l] = true
	}
	if len(leaders) != 1 || leaders[""] {
		return fmt.Errorf("leaders seen: %v", leaders)
	}
	return nil
}

// TestStaggeredStartInReverseOrder starts the nodes one by one, last first,
// each knowing only the address of the node after it.
func TestStaggeredStartInReverseOrder(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Options{})
	for i := 2; i >= 0; i-- {
		c.StartNode(c.Nodes[i], 3, []string{c.Nodes[(i+1)%3].GossipAddr()})
		time.Sleep(300 * time.Millisecond) // the point is the gap between starts
	}
	c.WaitLeader(30 * time.Second)
	testutil.Eventually(t, 10*time.Second, "one cluster", func() error { return oneCluster(c) })
}

// TestConcurrentClaimsOneWinnerPerKey races 50 clients over all nodes on the
// same 200 keys: one WON per key, and every other answer is IN_PROGRESS or
// the winner's exact completion.
func TestConcurrentClaimsOneWinnerPerKey(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	const clients, keys = 50, 200
	var wins [keys]atomic.Int32
	var mu sync.Mutex
	winnerBody := map[int]string{}
	var seen sync.Map // key index -> []*idempb.Response observed as COMPLETED
	ctx := ctxFor(t, 2*time.Minute)
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := c.Nodes[cl%len(c.Nodes)].Client()
			for _, k := range rand.Perm(keys) {
				key := fmt.Sprintf("race-%d", k)
				owner := fmt.Sprintf("client-%d", cl)
				resp, err := api.Claim(ctx, claimReq(key, owner))
				if err != nil {
					t.Errorf("claim %s: %v", key, err)
					return
				}
				switch resp.Outcome {
				case idempb.Outcome_OUTCOME_WON:
					wins[k].Add(1)
					body := fmt.Sprintf(`{"winner":%q}`, owner)
					mu.Lock()
					winnerBody[k] = body
					mu.Unlock()
					out, err := api.Complete(ctx, &idempb.CompleteRequest{Id: id(key), Token: resp.Token, Response: response(body)})
					if err != nil || out.Outcome != idempb.Outcome_OUTCOME_OK {
						t.Errorf("complete %s: %v %v", key, out, err)
					}
				case idempb.Outcome_OUTCOME_COMPLETED:
					old, _ := seen.LoadOrStore(k, resp.Response)
					if !proto.Equal(old.(*idempb.Response), resp.Response) {
						t.Errorf("key %s replayed two different responses", key)
					}
				case idempb.Outcome_OUTCOME_IN_PROGRESS:
				default:
					t.Errorf("claim %s: unexpected outcome %v", key, resp.Outcome)
				}
			}
		}()
	}
	wg.Wait()
	for k := range keys {
		if n := wins[k].Load(); n != 1 {
			t.Errorf("key %d: %d winners", k, n)
		}
		if r, ok := seen.Load(k); ok && !proto.Equal(r.(*idempb.Response), response(winnerBody[k])) {
			t.Errorf("key %d: replayed response is not the winner's", k)
		}
	}
}

// TestLeaderCrashKeepsAcknowledgedCompletions crashes the leader in the
// middle of a claim/complete load; every acknowledged completion survives,
// byte for byte, on every node.
func TestLeaderCrashKeepsAcknowledgedCompletions(t *testing.T) {
	skipInShort(t, "crashes the leader of a 3-node cluster under writes")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	var acked sync.Map // key -> body
	var crashed atomic.Bool
	ctx := ctxFor(t, 2*time.Minute)
	var wg sync.WaitGroup
	for cl := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				nodes := c.Running()
				api := nodes[(cl+i)%len(nodes)].Client()
				key := fmt.Sprintf("crash-%d-%d", cl, i)
				body := fmt.Sprintf(`{"client":%d,"i":%d}`, cl, i)
				callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := api.Claim(callCtx, claimReq(key, "o"))
				if err == nil && resp.Outcome == idempb.Outcome_OUTCOME_WON {
					var out *idempb.CompleteResponse
					out, err = api.Complete(callCtx, &idempb.CompleteRequest{Id: id(key), Token: resp.Token, Response: response(body)})
					if err == nil && out.Outcome == idempb.Outcome_OUTCOME_OK {
						acked.Store(key, body)
					}
				}
				cancel()
				if err != nil && !crashed.Load() {
					t.Errorf("call failed before the crash: %v", err)
				}
			}
		}()
	}
	// Crash only once the load is well under way.
	testutil.Eventually(t, 30*time.Second, "load running", func() error {
		if n := countAcked(&acked); n < 100 {
			return fmt.Errorf("%d completions acknowledged", n)
		}
		return nil
	})
	leader := c.WaitLeader(10 * time.Second)
	crashed.Store(true)
	c.Crash(leader)
	wg.Wait()
	c.WaitLeader(30 * time.Second)
	c.Restart(leader)
	c.WaitConverged(30 * time.Second)
	n := 0
	acked.Range(func(k, v any) bool {
		n++
		for _, nd := range c.Nodes {
			got, err := nd.Client().Get(ctx, &idempb.GetRequest{Id: id(k.(string)), Consistency: idempb.Consistency_CONSISTENCY_STALE})
			if err != nil || got.Record.GetState() != idempb.State_STATE_COMPLETED || !proto.Equal(got.Record.Response, response(v.(string))) {
				t.Errorf("%s on %s: %v %v", k, nd.ID, got, err)
			}
		}
		return true
	})
	if n < 100 {
		t.Errorf("only %d completions acknowledged; the load did not run", n)
	}
	t.Logf("%d acknowledged completions checked on %d nodes", n, len(c.Nodes))
}

func countAcked(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

func isRetryable(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}
