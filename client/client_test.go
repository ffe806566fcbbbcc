package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testutil"
)

func wantOutcome(t *testing.T, what string, got, want client.Outcome) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %s, want %s", what, got, want)
	}
}

// TestOperations walks one key through every low-level call.
func TestOperations(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id, fp := newID(), []byte("request-1")

	won, err := cl.Claim(ctx, id, fp)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "first claim", won.Outcome, client.OutcomeWon)
	if won.Token == 0 || won.Attempt != 1 || won.Owner == "" || won.LeaseExpiresAt.IsZero() {
		t.Errorf("first claim = %+v, want a token, attempt 1, an owner and a lease", won)
	}
	if leader := shared.WaitLeader(30 * time.Second); cl.Leader() != leader.GRPCAddr() {
		t.Errorf("client believes %q leads, want %s", cl.Leader(), leader.GRPCAddr())
	}
	other, err := cl.Claim(ctx, id, fp)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "claim by another owner", other.Outcome, client.OutcomeInProgress)
	if other.Token != 0 {
		t.Errorf("IN_PROGRESS revealed the holder's token %d", other.Token)
	}
	for name, opt := range map[string]client.Option{
		"WithOwner":    client.WithOwner(won.Owner),
		"ClaimOptions": client.ClaimOptions{Owner: won.Owner}, // the deprecated form still works
	} {
		again, err := cl.Claim(ctx, id, fp, opt)
		if err != nil || again.Outcome != client.OutcomeWon || again.Token != won.Token || again.Owner != won.Owner {
			t.Errorf("claim with the same owner (%s) = %+v, %v; want WON with token %d", name, again, err, won.Token)
		}
	}

	ext, err := cl.Extend(ctx, id, won.Token, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "extend", ext.Outcome, client.OutcomeOK)
	if !ext.LeaseExpiresAt.After(won.LeaseExpiresAt) {
		t.Errorf("extend moved the lease to %s, not past %s", ext.LeaseExpiresAt, won.LeaseExpiresAt)
	}
	if got, err := cl.Get(ctx, id); err != nil || got.State != client.StatePending || got.Token != won.Token {
		t.Errorf("get while pending = %+v, %v", got, err)
	}

	resp := client.Response{Status: 201, Headers: []client.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-A", Value: "1"}, {Name: "X-A", Value: "2"}}, Body: []byte(`{"id":"ch_1"}`)}
	done, err := cl.Complete(ctx, id, won.Token, resp)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "complete", done, client.OutcomeOK)
	replay, err := cl.Claim(ctx, id, fp)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "claim after completion", replay.Outcome, client.OutcomeCompleted)
	checkResponse(t, "replay", replay.Response, resp)

	mismatch, err := cl.Claim(ctx, id, []byte("request-2"))
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "claim with another fingerprint", mismatch.Outcome, client.OutcomeMismatch)
	if fenced, err := cl.Release(ctx, id, won.Token); err != nil || fenced != client.OutcomeFenced {
		t.Errorf("release of a completed record = %s, %v; want FENCED", fenced, err)
	}
	rec, err := cl.Get(ctx, id, client.Stale())
	if err != nil {
		t.Fatal(err)
	}
	checkResponse(t, "stale get", rec.Response, resp)
	w, err := cl.Wait(ctx, id, time.Minute)
	if err != nil || w.Outcome != client.OutcomeCompleted {
		t.Errorf("wait on a completed record = %+v, %v; want COMPLETED at once", w, err)
	}
	if _, err := cl.Get(ctx, newID()); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("get of an absent key = %v, want ErrNotFound", err)
	}
}

func checkResponse(t *testing.T, what string, got *client.Response, want client.Response) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no response", what)
	}
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) || len(got.Headers) != len(want.Headers) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
	for i := range want.Headers {
		if got.Headers[i] != want.Headers[i] {
			t.Errorf("%s header %d = %v, want %v", what, i, got.Headers[i], want.Headers[i])
		}
	}
}

// TestServerSideWait holds Wait and Claim-with-wait on the server until the
// holder completes or releases.
func TestServerSideWait(t *testing.T) {
	cl := newClient(t, shared)
	ctx := testCtx(t)
	claim := func(id client.ID, wait time.Duration) client.ClaimResult {
		t.Helper()
		r, err := cl.Claim(ctx, id, nil, client.WithWait(wait))
		if err != nil {
			t.Fatalf("claim %s: %v", id, err)
		}
		return r
	}

	forWait, forClaim := newID(), newID()
	holders := []client.ClaimResult{claim(forWait, 0), claim(forClaim, 0)}
	var waited <-chan testutil.Answer[client.WaitResult]
	var claimed <-chan testutil.Answer[client.ClaimResult]
	heldOnLeader(t, shared, 2, func() {
		waited = testutil.Go(func() (client.WaitResult, error) { return cl.Wait(ctx, forWait, time.Minute) })
		claimed = testutil.Go(func() (client.ClaimResult, error) {
			return cl.Claim(ctx, forClaim, nil, client.WithWait(time.Minute))
		})
	})
	resp := client.Response{Status: 200, Body: []byte("ok")}
	for i, id := range []client.ID{forWait, forClaim} {
		if out, err := cl.Complete(ctx, id, holders[i].Token, resp); err != nil || out != client.OutcomeOK {
			t.Fatalf("complete = %s, %v", out, err)
		}
	}
	w := testutil.Await(t, "wait", 30*time.Second, waited)
	if w.Err != nil || w.V.Outcome != client.OutcomeCompleted {
		t.Fatalf("wait = %+v, %v; want COMPLETED", w.V, w.Err)
	}
	checkResponse(t, "wait", w.V.Record.Response, resp)
	c := testutil.Await(t, "waiting claim", 30*time.Second, claimed)
	if c.Err != nil || c.V.Outcome != client.OutcomeCompleted {
		t.Fatalf("waiting claim = %+v, %v; want COMPLETED", c.V, c.Err)
	}
	checkResponse(t, "waiting claim", c.V.Response, resp)

	released := newID()
	holder := claim(released, 0)
	heldOnLeader(t, shared, 1, func() {
		claimed = testutil.Go(func() (client.ClaimResult, error) {
			return cl.Claim(ctx, released, nil, client.WithWait(time.Minute))
		})
	})
	if out, err := cl.Release(ctx, released, holder.Token); err != nil || out != client.OutcomeOK {
		t.Fatalf("release = %s, %v", out, err)
	}
	c = testutil.Await(t, "waiting claim", 30*time.Second, claimed)
	if c.Err != nil || c.V.Outcome != client.OutcomeWon || c.V.Token <= holder.Token {
		t.Fatalf("waiting claim after release = %+v, %v; want WON with a newer token", c.V, c.Err)
	}

	start := time.Now()
	w = testutil.Await(t, "short wait", 30*time.Second, testutil.Go(func() (client.WaitResult, error) { return cl.Wait(ctx, released, 200*time.Millisecond) }))
	if w.Err != nil || w.V.Outcome != client.OutcomeInProgress || time.Since(start) < 200*time.Millisecond {
		t.Errorf("wait that timed out = %+v, %v after %s; want IN_PROGRESS after 200ms", w.V, w.Err, time.Since(start))
	}
}

// TestWaitAnswersBeforeDeadline: a wait longer than the caller's deadline
// is cut so that the server's IN_PROGRESS arrives instead of an error.
func TestWaitAnswersBeforeDeadline(t *testing.T) {
	t.Parallel()
	cl := newClient(t, shared)
	ctx := testCtx(t)
	id := newID()
	if won, err := cl.Claim(ctx, id, nil); err != nil || won.Outcome != client.OutcomeWon {
		t.Fatalf("claim = %+v, %v", won, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	got, err := cl.Claim(short, id, nil, client.WithWait(time.Minute))
	if err != nil || got.Outcome != client.OutcomeInProgress {
		t.Errorf("claim waiting past the deadline = %+v, %v; want IN_PROGRESS", got, err)
	}
}
