package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testutil"
)

// counted returns fn that counts its runs and answers resp, err.
func counted(runs *atomic.Int64, resp client.Response, err error) func(context.Context) (client.Response, error) {
	return func(context.Context) (client.Response, error) {
		runs.Add(1)
		return resp, err
	}
}

func TestDoRunsOnceAndReplays(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, runs := newID(), &atomic.Int64{}
	want := client.Response{Status: 201, Headers: []client.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"id":"ch_1"}`)}
	first, err := cl.Do(ctx, id, []byte("fp"), counted(runs, want, nil))
	if err != nil || !first.Executed || first.Replayed || first.Action != client.Complete {
		t.Fatalf("first do = %+v, %v; want executed and completed", first, err)
	}
	second, err := cl.Do(ctx, id, []byte("fp"), counted(runs, client.Response{Status: 500}, nil))
	if err != nil || !second.Replayed || second.Executed || second.Token != first.Token {
		t.Fatalf("second do = %+v, %v; want a replay", second, err)
	}
	checkResponse(t, "replay", &second.Response, want)
	if runs.Load() != 1 {
		t.Errorf("function ran %d times, want 1", runs.Load())
	}
	if _, err := cl.Do(ctx, id, []byte("other"), counted(runs, want, nil)); !errors.Is(err, client.ErrMismatch) {
		t.Errorf("do with another fingerprint = %v, want ErrMismatch", err)
	}
}

// TestHolderToken: fn reads the token of the claim it runs under, the one
// Do reports; outside fn there is none.
func TestHolderToken(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	var seen uint64
	res, err := cl.Do(ctx, newID(), []byte("fp"), func(ctx context.Context) (client.Response, error) {
		seen, _ = client.HolderToken(ctx)
		return client.Response{Status: 200}, nil
	})
	if err != nil || seen == 0 || seen != res.Token {
		t.Fatalf("fn saw token %d, Do reports %d (%v)", seen, res.Token, err)
	}
	if _, ok := client.HolderToken(ctx); ok {
		t.Error("a token outside fn")
	}
}

func TestDoPermanentFailureIsStored(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, runs := newID(), &atomic.Int64{}
	declined := client.Response{Status: 402, Body: []byte(`{"title":"card declined"}`)}
	errDeclined := errors.New("card declined")
	res, err := cl.Do(ctx, id, nil, counted(runs, declined, client.Permanent(errDeclined)))
	if !errors.Is(err, errDeclined) || !client.IsPermanent(err) || res.Action != client.Complete {
		t.Fatalf("do = %+v, %v; want the permanent error and a completion", res, err)
	}
	replay, err := cl.Do(ctx, id, nil, counted(runs, client.Response{}, nil))
	if err != nil || !replay.Replayed {
		t.Fatalf("retry = %+v, %v; want a replay", replay, err)
	}
	checkResponse(t, "replay of the failure", &replay.Response, declined)
	if runs.Load() != 1 {
		t.Errorf("function ran %d times, want 1", runs.Load())
	}
}

func TestDoTransientFailureReleases(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, runs := newID(), &atomic.Int64{}
	errTimeout := errors.New("bank timed out")
	res, err := cl.Do(ctx, id, nil, counted(runs, client.Response{Status: 503}, errTimeout))
	if !errors.Is(err, errTimeout) || res.Action != client.Release || !res.Executed {
		t.Fatalf("do = %+v, %v; want the error and a release", res, err)
	}
	if _, err := cl.Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get after release = %v, want ErrNotFound", err)
	}
	res, err = cl.Do(ctx, id, nil, counted(runs, client.Response{Status: 201}, nil))
	if err != nil || !res.Executed || runs.Load() != 2 {
		t.Errorf("retry = %+v, %v after %d runs; want it to run again", res, err, runs.Load())
	}
}

// TestDoCustomClassifier releases on a 5xx response that came without error.
func TestDoCustomClassifier(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, runs := newID(), &atomic.Int64{}
	by5xx := client.WithClassifier(func(r client.Response, err error) client.Action {
		if err != nil || r.Status >= 500 {
			return client.Release
		}
		return client.Complete
	})
	if res, err := cl.Do(ctx, id, nil, counted(runs, client.Response{Status: 503}, nil), by5xx); err != nil || res.Action != client.Release {
		t.Fatalf("do = %+v, %v; want a release", res, err)
	}
	if res, err := cl.Do(ctx, id, nil, counted(runs, client.Response{Status: 201}, nil), by5xx); err != nil || !res.Executed || res.Action != client.Complete {
		t.Fatalf("retry = %+v, %v; want it to run and complete", res, err)
	}
}

func TestDoPanicReleases(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id := newID()
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the function's panic value", p)
			}
		}()
		_, _ = cl.Do(ctx, id, nil, func(context.Context) (client.Response, error) { panic("boom") })
		t.Error("Do returned after the function panicked")
	}()
	if _, err := cl.Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get after the panic = %v, want ErrNotFound (released)", err)
	}
	runs := &atomic.Int64{}
	if res, err := cl.Do(ctx, id, nil, counted(runs, client.Response{Status: 201}, nil)); err != nil || !res.Executed {
		t.Errorf("retry after the panic = %+v, %v; want it to run", res, err)
	}
}

// TestDoWaitsForInFlight: a duplicate Do while the first runs is held by
// the server and answered with the first one's response.
func TestDoWaitsForInFlight(t *testing.T) {
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, runs := newID(), &atomic.Int64{}
	started, finish := make(chan struct{}), make(chan struct{})
	first := testutil.Go(func() (client.Result, error) {
		return cl.Do(ctx, id, nil, func(context.Context) (client.Response, error) {
			runs.Add(1)
			close(started)
			<-finish
			return client.Response{Status: 201, Body: []byte("first")}, nil
		})
	})
	<-started
	var second <-chan testutil.Answer[client.Result]
	heldOnLeader(t, shared, 1, func() {
		second = testutil.Go(func() (client.Result, error) { return cl.Do(ctx, id, nil, counted(runs, client.Response{}, nil)) })
	})
	short, err := cl.Do(ctx, id, nil, counted(runs, client.Response{}, nil), client.WithWait(100*time.Millisecond))
	var inProgress *client.InProgressError
	if !errors.As(err, &inProgress) || !errors.Is(err, client.ErrInProgress) || inProgress.LeaseExpiresAt.IsZero() {
		t.Errorf("do with a 100ms wait = %+v, %v; want an *InProgressError", short, err)
	}
	close(finish)
	if a := testutil.Await(t, "first do", 30*time.Second, first); a.Err != nil || !a.V.Executed {
		t.Fatalf("first do = %+v, %v", a.V, a.Err)
	}
	a := testutil.Await(t, "waiting do", 30*time.Second, second)
	if a.Err != nil || !a.V.Replayed || string(a.V.Response.Body) != "first" {
		t.Errorf("waiting do = %+v, %v; want the first response replayed", a.V, a.Err)
	}
	if runs.Load() != 1 {
		t.Errorf("function ran %d times, want 1", runs.Load())
	}
}

// TestDoExtendsLease runs a function for longer than its 1s lease: the
// background extension keeps another claimer out.
func TestDoExtendsLease(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id := newID()
	res, err := cl.Do(ctx, id, nil, func(ctx context.Context) (client.Response, error) {
		// The subject of the test is time passing: outlive the first lease.
		<-time.After(2 * time.Second)
		other, err := newClient(t, shared).Claim(ctx, id, nil)
		if err != nil || other.Outcome != client.OutcomeInProgress {
			return client.Response{}, fmt.Errorf("claim by another caller after 2s = %+v, %v; want IN_PROGRESS", other, err)
		}
		return client.Response{Status: 200}, nil
	}, client.WithLease(time.Second))
	if err != nil || res.Action != client.Complete {
		t.Errorf("do = %+v, %v", res, err)
	}
}

// TestDoLeaseLostCancelsRun blocks lease extensions until another caller
// took the record over; the next extension answers FENCED, the run's
// context ends with ErrFenced, and Do reports the lost completion.
func TestDoLeaseLostCancelsRun(t *testing.T) {
	t.Parallel()
	var blockExtend atomic.Bool
	blockExtend.Store(true)
	cl := newClient(t, shared, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if method == "/idem.v1.Idempotency/Extend" && blockExtend.Load() {
					return status.Error(codes.Unavailable, "extension blocked by the test")
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}))
	})
	ctx := testCtx(t)
	id := newID()
	res, err := cl.Do(ctx, id, nil, func(ctx context.Context) (client.Response, error) {
		other := newClient(t, shared)
		taken, err := other.Claim(ctx, id, nil, client.WithWait(10*time.Second))
		if err != nil || taken.Outcome != client.OutcomeWon || taken.Attempt != 2 {
			return client.Response{}, fmt.Errorf("takeover = %+v, %v; want WON attempt 2", taken, err)
		}
		blockExtend.Store(false)
		<-ctx.Done()
		return client.Response{Status: 200}, context.Cause(ctx)
	}, client.WithLease(time.Second), client.WithClassifier(func(client.Response, error) client.Action { return client.Complete }))
	if !errors.Is(err, client.ErrFenced) || !res.Executed {
		t.Errorf("do whose lease was lost = %+v, %v; want ErrFenced", res, err)
	}
}

// TestDoUnstorableResponseReleases: a response the server refuses to store
// (over the 1 MiB body limit) releases the key instead of leaving it
// PENDING, and Do says why.
func TestDoUnstorableResponseReleases(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, runs := newID(), &atomic.Int64{}
	huge := client.Response{Status: 200, Body: make([]byte, 1<<20+1)}
	res, err := cl.Do(ctx, id, nil, counted(runs, huge, nil))
	if status.Code(err) != codes.InvalidArgument || res.Action != client.Release || !res.Executed {
		t.Fatalf("do with a 1 MiB+1 response = %+v, %v; want InvalidArgument and a release", res.Action, err)
	}
	if _, err := cl.Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("get after an unstorable response = %v, want ErrNotFound", err)
	}
}

// TestDoResumesAfterACrashBetweenSteps: a holder charges, records the
// step, and dies before the receipt (no release: its lease runs out). The
// next Do takes the record over and resumes after the charge: the card is
// charged once, the receipt sent once.
// twoStepRide charges a card (counted in charges, recorded as the point
// "charged" with the charge's id) and sends a receipt (counted in
// receipts); a run that resumes after "charged" does not charge again.
func twoStepRide(charges, receipts *atomic.Int64) func(context.Context) (client.Response, error) {
	return func(ctx context.Context) (client.Response, error) {
		run, _ := client.RunFrom(ctx)
		charge, resumed := run.Resume()
		if !resumed {
			charge = client.RecoveryPoint{Name: "charged", Data: []byte(fmt.Sprint("ch_", charges.Add(1)))}
			if err := run.Checkpoint(ctx, charge.Name, charge.Data); err != nil {
				return client.Response{}, err
			}
		}
		receipts.Add(1)
		return client.Response{Status: 201, Body: charge.Data}, nil
	}
}

func TestDoResumesAfterACrashBetweenSteps(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, fp := newID(), []byte("ride")
	var charges, receipts atomic.Int64
	ride := twoStepRide(&charges, &receipts)

	// The first holder, by hand: claims, charges, records it, dies.
	won, err := cl.Claim(ctx, id, fp, client.WithLease(time.Second))
	if err != nil || won.Outcome != client.OutcomeWon {
		t.Fatalf("claim: %+v %v", won, err)
	}
	charges.Add(1)
	if out, err := cl.Checkpoint(ctx, id, won.Token, "charged", []byte("ch_1")); err != nil || out != client.OutcomeOK {
		t.Fatalf("checkpoint: %v %v", out, err)
	}

	res, err := cl.Do(ctx, id, fp, ride, client.WithWait(5*time.Second))
	if err != nil || !res.Executed || string(res.Response.Body) != "ch_1" {
		t.Fatalf("do after the crash: %+v %v", res, err)
	}
	if charges.Load() != 1 || receipts.Load() != 1 {
		t.Fatalf("%d charges and %d receipts, want one of each", charges.Load(), receipts.Load())
	}
	again, err := cl.Do(ctx, id, fp, ride)
	if err != nil || !again.Replayed || string(again.Response.Body) != "ch_1" {
		t.Fatalf("retry after completion: %+v %v", again, err)
	}
}

// TestRunCheckpointOutcomes: the same point with other data is a mismatch,
// and a run that lost its record is fenced.
func TestRunCheckpointOutcomes(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	_, err := cl.Do(ctx, newID(), []byte("fp"), func(ctx context.Context) (client.Response, error) {
		run, _ := client.RunFrom(ctx)
		if _, ok := run.Resume(); ok {
			t.Error("a first run resumes")
		}
		if err := run.Checkpoint(ctx, "charged", []byte("a")); err != nil {
			return client.Response{}, err
		}
		if err := run.Checkpoint(ctx, "charged", []byte("a")); err != nil {
			return client.Response{}, fmt.Errorf("the same checkpoint again: %w", err)
		}
		if err := run.Checkpoint(ctx, "charged", []byte("b")); !errors.Is(err, client.ErrMismatch) {
			return client.Response{}, fmt.Errorf("other data for the same point: %v, want ErrMismatch", err)
		}
		return client.Response{Status: 200}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	id := newID()
	won, err := cl.Claim(ctx, id, []byte("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cl.Checkpoint(ctx, id, won.Token+1, "charged", nil); err != nil || out != client.OutcomeFenced {
		t.Fatalf("checkpoint by another token: %v %v", out, err)
	}
	// A run whose record was released from under it is fenced.
	_, err = cl.Do(ctx, newID(), []byte("fp"), func(ctx context.Context) (client.Response, error) {
		run, _ := client.RunFrom(ctx)
		if out, err := cl.Release(ctx, run.ID(), run.Token()); err != nil || out != client.OutcomeOK {
			return client.Response{}, fmt.Errorf("release: %v %v", out, err)
		}
		if err := run.Checkpoint(ctx, "charged", nil); !errors.Is(err, client.ErrFenced) {
			return client.Response{}, fmt.Errorf("checkpoint after the record was released: %v, want ErrFenced", err)
		}
		return client.Response{Status: 200}, nil
	})
	if err == nil || !errors.Is(err, client.ErrFenced) {
		t.Fatalf("do whose record was released: %v, want the completion fenced", err)
	}
}
