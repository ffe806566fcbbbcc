package rpc

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/internal/testclock"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// async runs call in a goroutine; receive its answer from the channel.
func async[T any](call func() (T, error)) <-chan asyncResult[T] {
	ch := make(chan asyncResult[T], 1)
	go func() {
		v, err := call()
		ch <- asyncResult[T]{v, err}
	}()
	return ch
}

type asyncResult[T any] struct {
	v   T
	err error
}

func receive[T any](t *testing.T, ch <-chan asyncResult[T]) T {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("call failed: %v", r.err)
		}
		return r.v
	case <-time.After(20 * time.Second):
		t.Fatal("call did not return within 20s")
	}
	var zero T
	return zero
}

// claimAsync sends a claim with wait in a goroutine and returns once the
// server holds it watching the key.
func (c *testCluster) claimAsync(t *testing.T, key, owner string, wait time.Duration) <-chan asyncResult[*idempb.ClaimResponse] {
	t.Helper()
	base, ctx := c.node.Machine().Waiting(), testCtx(t)
	ch := async(func() (*idempb.ClaimResponse, error) {
		return c.api.Claim(ctx, &idempb.ClaimRequest{Id: rid(key), Owner: owner, Wait: dur(wait)})
	})
	c.waitForWaiters(t, base+1)
	return ch
}

func (c *testCluster) waitAsync(t *testing.T, key string, timeout time.Duration) <-chan asyncResult[*idempb.WaitResponse] {
	t.Helper()
	base, ctx := c.node.Machine().Waiting(), testCtx(t)
	ch := async(func() (*idempb.WaitResponse, error) {
		return c.api.Wait(ctx, &idempb.WaitRequest{Id: rid(key), Timeout: dur(timeout)})
	})
	c.waitForWaiters(t, base+1)
	return ch
}

func (c *testCluster) complete(t *testing.T, key string, token uint64) {
	t.Helper()
	out, err := c.api.Complete(testCtx(t), &idempb.CompleteRequest{Id: rid(key), Token: token, Response: storedResponse()})
	if err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("complete %s = %v, %v; want OK", key, out, err)
	}
}

func (c *testCluster) release(t *testing.T, key string, token uint64) {
	t.Helper()
	out, err := c.api.Release(testCtx(t), &idempb.ReleaseRequest{Id: rid(key), Token: token})
	if err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("release %s = %v, %v; want OK", key, out, err)
	}
}

// TestClaimWait holds an IN_PROGRESS claim until the record leaves PENDING;
// the subtests share one node and use a key each.
func TestClaimWait(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Now())
	c := mustClusterOn(t, clk)
	t.Run("completion replays the response", func(t *testing.T) {
		holder := c.mustWin(t, "completion", "holder", nil)
		waiter := c.claimAsync(t, "completion", "waiter", 5*time.Second)
		c.complete(t, "completion", holder.GetToken())
		got := receive(t, waiter)
		outcome(t, "waiting claim", got.GetOutcome(), idempb.Outcome_OUTCOME_COMPLETED)
		if !proto.Equal(got.GetResponse(), storedResponse()) || got.GetToken() != holder.GetToken() {
			t.Errorf("waiting claim = %v, want the holder's response", got)
		}
	})
	t.Run("release lets the waiter win", func(t *testing.T) {
		holder := c.mustWin(t, "release", "holder", nil)
		waiter := c.claimAsync(t, "release", "waiter", 5*time.Second)
		c.release(t, "release", holder.GetToken())
		got := receive(t, waiter)
		outcome(t, "waiting claim", got.GetOutcome(), idempb.Outcome_OUTCOME_WON)
		if got.GetToken() <= holder.GetToken() || got.GetAttempt() != 1 {
			t.Errorf("waiting claim = %v, want a new record with a token above %d", got, holder.GetToken())
		}
	})
	// The holder never finishes, so the waiter wakes when the lease ends and
	// takes the record over, well before its own wait ends: the clock moves
	// to the lease end only, so a waiter that slept through it would wait
	// for good.
	t.Run("expired lease is taken over", func(t *testing.T) {
		holder := c.claim(t, &idempb.ClaimRequest{Id: rid("takeover"), Owner: "holder", Lease: dur(time.Second)})
		outcome(t, "holder's claim", holder.GetOutcome(), idempb.Outcome_OUTCOME_WON)
		start := time.Now()
		waiter := c.claimAsync(t, "takeover", "waiter", 5*time.Second)
		clk.Advance(time.Second)
		got := receive(t, waiter)
		outcome(t, "waiting claim", got.GetOutcome(), idempb.Outcome_OUTCOME_WON)
		if got.GetAttempt() != 2 || got.GetToken() <= holder.GetToken() {
			t.Errorf("takeover = %v, want attempt 2 and a token above %d", got, holder.GetToken())
		}
		if elapsed := time.Since(start); elapsed > 4*time.Second {
			t.Errorf("takeover took %s: the waiter did not wake at the lease end", elapsed)
		}
		out, err := c.api.Complete(testCtx(t), &idempb.CompleteRequest{Id: rid("takeover"), Token: holder.GetToken()})
		if err != nil || out.GetOutcome() != idempb.Outcome_OUTCOME_FENCED {
			t.Errorf("complete by the expired holder = %v, %v; want FENCED", out, err)
		}
	})
	t.Run("wait ends first", func(t *testing.T) {
		holder := c.mustWin(t, "ends", "holder", nil)
		waiter := c.claimAsync(t, "ends", "waiter", 200*time.Millisecond)
		clk.Advance(200 * time.Millisecond)
		got := receive(t, waiter)
		outcome(t, "claim whose wait ended", got.GetOutcome(), idempb.Outcome_OUTCOME_IN_PROGRESS)
		if got.GetToken() != 0 || !proto.Equal(got.GetLeaseExpiresAt(), holder.GetLeaseExpiresAt()) {
			t.Errorf("claim whose wait ended = %v, want the lease end and no token", got)
		}
	})
}

func TestWait(t *testing.T) {
	t.Parallel()
	c := mustCluster(t)
	wait := func(key string, timeout time.Duration) *idempb.WaitResponse {
		resp, err := c.api.Wait(testCtx(t), &idempb.WaitRequest{Id: rid(key), Timeout: dur(timeout)})
		if err != nil {
			t.Fatalf("wait %s: %v", key, err)
		}
		return resp
	}
	outcome(t, "wait on an absent key", wait("absent", time.Minute).GetOutcome(), idempb.Outcome_OUTCOME_NOT_FOUND)

	done := c.mustWin(t, "completed", "holder", nil)
	waiter := c.waitAsync(t, "completed", 5*time.Second)
	c.complete(t, "completed", done.GetToken())
	got := receive(t, waiter)
	outcome(t, "wait through completion", got.GetOutcome(), idempb.Outcome_OUTCOME_COMPLETED)
	if r := got.GetRecord(); r.GetState() != idempb.State_STATE_COMPLETED || !proto.Equal(r.GetResponse(), storedResponse()) {
		t.Errorf("wait through completion = %v, want the completed record", r)
	}
	again := wait("completed", time.Minute)
	if !proto.Equal(again, got) {
		t.Errorf("wait on a completed key = %v, want %v at once", again, got)
	}

	released := c.mustWin(t, "released", "holder", nil)
	waiter = c.waitAsync(t, "released", 5*time.Second)
	c.release(t, "released", released.GetToken())
	outcome(t, "wait through release", receive(t, waiter).GetOutcome(), idempb.Outcome_OUTCOME_NOT_FOUND)

	c.mustWin(t, "pending", "holder", nil)
	start := time.Now()
	got = wait("pending", 200*time.Millisecond)
	outcome(t, "wait that timed out", got.GetOutcome(), idempb.Outcome_OUTCOME_IN_PROGRESS)
	if got.GetRecord().GetState() != idempb.State_STATE_PENDING {
		t.Errorf("wait that timed out = %v, want the PENDING record", got.GetRecord())
	}
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Errorf("wait returned after %s, before its 200ms timeout", elapsed)
	}
}

// TestShutdownEndsWaits: a node that shuts down answers the calls it holds
// waiting with Unavailable SHUTTING_DOWN at once, so callers retry on another
// node, instead of holding them until the server's grace cuts them off.
func TestShutdownEndsWaits(t *testing.T) {
	t.Parallel()
	node := mustNode(t)
	s, conn := serveAPI(t, node, DefaultLimits())
	c := &testCluster{node: node, conn: conn, api: idempb.NewIdempotencyClient(conn), admin: idempb.NewAdminClient(conn)}
	c.mustWin(t, "held-a", "holder", nil)
	c.mustWin(t, "held-b", "holder", nil)
	stale := async(func() (*idempb.WaitResponse, error) {
		return c.api.Wait(testCtx(t), &idempb.WaitRequest{Id: rid("held-a"), Timeout: dur(time.Minute),
			Consistency: idempb.Consistency_CONSISTENCY_STALE})
	})
	c.waitForWaiters(t, 1) // keys watched: one per key
	claim := c.claimAsync(t, "held-b", "other", time.Minute)
	start := time.Now()
	s.Shutdown()
	for name, err := range map[string]error{"stale wait": (<-stale).err, "waiting claim": (<-claim).err} {
		checkDenied(t, name, err, codes.Unavailable, idempb.ReasonShuttingDown)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the waits ended %s after Shutdown", d)
	}
}
