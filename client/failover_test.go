package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestLeaderKillDuringDo runs operations from several workers through Do,
// crashes the leader in the middle, and checks that every key that
// completed ran its function exactly once and stored that run's response.
// Each worker retries a failed Do the way an application would, with the
// same key; leases are short, so a Do that lost track of its own claim
// would let the retry take the key over and run the function again.
func TestLeaderKillDuringDo(t *testing.T) {
	skipInShort(t, "kills the leader of a 3-node cluster under calls")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	var unavailable atomic.Int64
	cl := newClient(t, c, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoker(ctx, method, req, reply, cc, opts...)
				if status.Code(err) == codes.Unavailable {
					unavailable.Add(1)
				}
				return err
			}))
	})
	const workers, perWorker = 6, 25
	var (
		mu       sync.Mutex
		runs     = map[string]int{}
		produced = map[string]string{}
		ids      []client.ID
		finished atomic.Int64
		afterNow atomic.Int64 // Do calls that finished after the crash
	)
	crashAt := make(chan struct{})
	crashed := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if i == perWorker-1 {
					// Each worker's last operation starts after the crash,
					// however long the crash took: on a loaded machine the
					// others could all end before it.
					<-crashed
				}
				id := client.ID{Tenant: "acme", Scope: "POST /v1/charges", Key: fmt.Sprintf("w%d-op%d", w, i)}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				for try := 0; try < 3; try++ {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_, err := cl.Do(ctx, id, []byte(id.Key), func(ctx context.Context) (client.Response, error) {
						mu.Lock()
						runs[id.Key]++
						body := fmt.Sprintf("%s run %d", id.Key, runs[id.Key])
						produced[id.Key] = body
						mu.Unlock()
						return client.Response{Status: 201, Body: []byte(body)}, nil
					}, client.WithLease(2*time.Second))
					cancel()
					if err == nil {
						break
					}
					t.Logf("%s try %d: %v", id.Key, try, err)
				}
				select {
				case <-crashed:
					afterNow.Add(1)
				default:
				}
				if finished.Add(1) == workers*perWorker/3 {
					close(crashAt)
				}
			}
		}()
	}
	<-crashAt
	leader := c.WaitLeader(30 * time.Second)
	c.Crash(leader)
	close(crashed)
	t.Logf("crashed the leader %s after %d operations", leader.ID, finished.Load())
	wg.Wait()

	if afterNow.Load() == 0 || unavailable.Load() == 0 {
		t.Fatalf("%d operations after the crash, %d Unavailable answers: the crash did not hit running calls", afterNow.Load(), unavailable.Load())
	}
	check := newClient(t, c)
	ctx := testCtx(t)
	completed := 0
	for _, id := range ids {
		rec, err := check.Get(ctx, id)
		if err != nil {
			t.Errorf("%s: %v", id.Key, err)
			continue
		}
		if rec.State != client.StateCompleted {
			continue
		}
		completed++
		mu.Lock()
		n, body := runs[id.Key], produced[id.Key]
		mu.Unlock()
		if n != 1 || string(rec.Response.Body) != body {
			t.Errorf("%s: completed with %q after %d runs; want 1 run that stored %q", id.Key, rec.Response.Body, n, body)
		}
	}
	if completed != len(ids) {
		t.Errorf("%d of %d keys completed", completed, len(ids))
	}
	t.Logf("%d keys completed, %d Unavailable answers retried", completed, unavailable.Load())
}

// TestWaitAcrossLeaderChange holds a Wait and a waiting Claim on the
// leader, moves leadership away, and checks that the SDK's calls, ended by
// the old leader with LEADERSHIP_LOST, are retried on the new leader and
// return the completion without an error.
func TestWaitAcrossLeaderChange(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	var leadershipLost atomic.Int64
	cl := newClient(t, c, func(cfg *client.Config) {
		cfg.LeaderRefresh = 100 * time.Millisecond
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoker(ctx, method, req, reply, cc, opts...)
				if status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "leadership") {
					leadershipLost.Add(1)
				}
				return err
			}))
	})
	ctx := testCtx(t)
	forWait, forClaim := newID(), newID()
	var holders []client.ClaimResult
	for _, id := range []client.ID{forWait, forClaim} {
		h, err := cl.Claim(ctx, id, nil)
		if err != nil || h.Outcome != client.OutcomeWon {
			t.Fatalf("holder's claim = %+v, %v", h, err)
		}
		holders = append(holders, h)
	}
	var waited <-chan testutil.Answer[client.WaitResult]
	var claimed <-chan testutil.Answer[client.ClaimResult]
	heldOnLeader(t, c, 2, func() {
		waited = testutil.Go(func() (client.WaitResult, error) { return cl.Wait(ctx, forWait, time.Minute) })
		claimed = testutil.Go(func() (client.ClaimResult, error) {
			return cl.Claim(ctx, forClaim, nil, client.WithWait(time.Minute))
		})
	})
	old := c.WaitLeader(30 * time.Second)
	if _, err := old.Admin().TransferLeadership(ctx, &idempb.TransferLeadershipRequest{}); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	next := c.WaitLeader(30 * time.Second)
	if next == old {
		t.Fatalf("leadership stayed on %s", old.ID)
	}
	testutil.Eventually(t, 20*time.Second, "both waits held again on the new leader", func() bool {
		return next.Node().Machine().Waiting() >= 2
	})
	resp := client.Response{Status: 201, Body: []byte("done")}
	for i, id := range []client.ID{forWait, forClaim} {
		if out, err := cl.Complete(ctx, id, holders[i].Token, resp); err != nil || out != client.OutcomeOK {
			t.Fatalf("complete = %s, %v", out, err)
		}
	}
	if w := testutil.Await(t, "wait", 30*time.Second, waited); w.Err != nil || w.V.Outcome != client.OutcomeCompleted {
		t.Errorf("wait across the leader change = %+v, %v; want COMPLETED", w.V, w.Err)
	}
	if a := testutil.Await(t, "waiting claim", 30*time.Second, claimed); a.Err != nil || a.V.Outcome != client.OutcomeCompleted || string(a.V.Response.Body) != "done" {
		t.Errorf("waiting claim across the leader change = %+v, %v; want COMPLETED", a.V, a.Err)
	}
	if leadershipLost.Load() < 2 {
		t.Errorf("%d LEADERSHIP_LOST answers seen, want the old leader to end both waits", leadershipLost.Load())
	}

	// Hand leadership over once more, with nothing in flight: calls keep
	// succeeding through the old leader, which forwards, and the client's
	// background refresh moves it to the new leader.
	if _, err := next.Admin().TransferLeadership(ctx, &idempb.TransferLeadershipRequest{}); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	third := c.WaitLeader(30 * time.Second)
	testutil.Eventually(t, 10*time.Second, "the client following the leader", func() error {
		if _, err := cl.Get(ctx, forWait); err != nil {
			return err
		}
		if got := cl.Leader(); got != third.GRPCAddr() {
			return fmt.Errorf("client sends writes to %q, the leader is %s", got, third.GRPCAddr())
		}
		return nil
	})
}
