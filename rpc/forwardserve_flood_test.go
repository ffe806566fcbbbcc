package rpc

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// stalledBackend is a node whose commits hang while stalled is set (a
// leader whose raft cannot commit: a slow disk, a lost quorum), until their
// context ends.
type stalledBackend struct {
	Backend
	stalled atomic.Bool
	resume  chan struct{}
}

func (b *stalledBackend) Apply(ctx context.Context, c *fsm.Command) (fsm.Result, error) {
	if b.stalled.Load() {
		select {
		case <-b.resume:
		case <-ctx.Done():
			return fsm.Result{}, ctx.Err()
		}
	}
	return b.Backend.Apply(ctx, c)
}

// leaderWithLimits serves a Server of backend with limits on a loopback
// port and returns it with its gRPC server and a forwarding link to it.
func leaderWithLimits(t *testing.T, backend Backend, limits Limits) (*Server, *grpc.Server, *link) {
	t.Helper()
	s := NewServer(backend, limits, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions()...)
	s.Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	f := &forwarder{}
	t.Cleanup(f.close)
	l, err := f.link(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return s, g, l
}

// plainClaim is a claim of key that does not wait.
func plainClaim(key, owner string) *idempb.ForwardCall {
	return &idempb.ForwardCall{Request: &idempb.ForwardCall_Claim{Claim: &idempb.ClaimRequest{
		Id: &idempb.RecordId{Tenant: "t", Key: key}, Fingerprint: []byte("fp"), Owner: owner,
		Lease: durationpb.New(time.Minute)}}}
}

// reasonOf returns the ErrorInfo reason err carries.
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// TestForwardedFloodIsBoundedWhileCommitsStall: while the leader cannot
// commit, a flood of forwarded claims far past the stream's workers takes
// no goroutine per call: past the workers and the queue, each is answered
// at once with Unavailable LEADER_BUSY, which the forwarding node retries.
// (Each call past the workers used to get a goroutine of its own, held
// until the commit came back.)
func TestForwardedFloodIsBoundedWhileCommitsStall(t *testing.T) {
	backend := &stalledBackend{Backend: mustNode(t), resume: make(chan struct{})}
	_, _, l := leaderWithLimits(t, backend, DefaultLimits())
	ctx := testCtx(t)
	base := runtime.NumGoroutine()
	backend.stalled.Store(true)
	const flood = callWorkers + commitQueue + 2000
	var busy, other atomic.Int64
	var otherErr atomic.Value
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.call(ctx, plainClaim(fmt.Sprintf("k%d", i), "o"))
			if err == nil {
				return
			}
			if status.Code(err) == codes.Unavailable && reasonOf(err) == idempb.ReasonLeaderBusy && retryable(err) {
				busy.Add(1)
				return
			}
			other.Add(1)
			otherErr.Store(fmt.Sprint(err))
		}()
	}
	refused := int64(flood - callWorkers - commitQueue)
	testutil.Eventually(t, 20*time.Second, "every call past the workers and the queue refused", func() bool {
		return busy.Load() >= refused || other.Load() > 0
	})
	if other.Load() > 0 || busy.Load() != refused {
		t.Fatalf("%d calls refused LEADER_BUSY, want %d; %d answered otherwise (%v)", busy.Load(), refused, other.Load(), otherErr.Load())
	}
	// What remains: the calls held (a caller's goroutine each, and a
	// worker each for the running ones), and some slack for the runtime.
	held := callWorkers + commitQueue
	if n := runtime.NumGoroutine() - base; n > held+callWorkers+200 {
		t.Fatalf("%d goroutines more than before the flood, with %d calls held: a goroutine per call", n, held)
	}
	backend.stalled.Store(false)
	close(backend.resume)
	wg.Wait()
	if other.Load() != 0 {
		t.Fatalf("held calls failed once commits resumed: %v", otherErr.Load())
	}
}

// TestForwardedWaitFloodLeavesClaimsPrompt: a flood of forwarded waiting
// claims, far more than the stream's workers and past the node's wait cap,
// holds at most the cap's worth of goroutines on the leader, refuses the
// rest as the cap does (ResourceExhausted TOO_MANY_WAITS), and a claim
// forwarded on the same stream meanwhile answers at once.
func TestForwardedWaitFloodLeavesClaimsPrompt(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxWaitsPerNode, limits.MaxWaitsPerTenant = 300, 300
	s, _, l := leaderWithLimits(t, mustNode(t), limits)
	ctx := testCtx(t)
	if _, err := s.Claim(ctx, &idempb.ClaimRequest{Id: &idempb.RecordId{Tenant: "t", Key: "held"},
		Fingerprint: []byte("fp"), Owner: "holder", Lease: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	waitCtx, cancelWaits := context.WithCancel(ctx)
	const flood = 3000
	var refused, other atomic.Int64
	var otherErr atomic.Value
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.call(waitCtx, waitingClaim("held", fmt.Sprintf("w%d", i), time.Minute))
			switch {
			case status.Code(err) == codes.ResourceExhausted && reasonOf(err) == idempb.ReasonTooManyWaits:
				refused.Add(1)
			case waitCtx.Err() != nil:
			default:
				other.Add(1)
				otherErr.Store(fmt.Sprint(err))
			}
		}()
	}
	testutil.Eventually(t, 20*time.Second, "the waits past the cap refused", func() bool {
		return refused.Load() >= flood-300 || other.Load() > 0
	})
	if other.Load() > 0 {
		t.Fatalf("%d waits answered neither held nor TOO_MANY_WAITS: %v", other.Load(), otherErr.Load())
	}
	if total, _ := s.waits.active(""); total > 300 {
		t.Fatalf("%d waits held, past the cap of 300", total)
	}
	// 300 callers held and 300 workers holding them, with slack.
	if n := runtime.NumGoroutine() - base; n > 2*300+200 {
		t.Fatalf("%d goroutines more than before the flood of waits", n)
	}
	start := time.Now()
	r, err := l.call(ctx, plainClaim("free", "o"))
	if err != nil || r.GetClaim().GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("a claim forwarded beside the waits: %v, %v", r, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a claim forwarded beside the waits took %v", d)
	}
	cancelWaits()
	wg.Wait()
}
