package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Action is what Do does with the key after the function ran.
type Action int

const (
	// Complete stores the Response: every retry is answered with it.
	Complete Action = iota + 1
	// Release deletes the claim: the next retry runs the function again.
	Release
)

// String returns "complete" or "release" ("none" for the zero Action of a
// Result whose function did not run).
func (a Action) String() string {
	switch a {
	case 0:
		return "none"
	case Complete:
		return "complete"
	case Release:
		return "release"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// A Classifier decides, from what the function returned, whether Do
// completes the key (success, or a permanent failure such as a declined
// card) or releases it (a transient failure such as a dependency's timeout).
type Classifier func(resp Response, err error) Action

// DefaultClassifier completes on a nil error or one marked with Permanent,
// and releases on any other error.
func DefaultClassifier(_ Response, err error) Action {
	if err == nil || IsPermanent(err) {
		return Complete
	}
	return Release
}

// Result is what Do produced.
type Result struct {
	// Response is the function's response when it ran in this call, or the
	// stored one when Replayed.
	Response Response
	// Replayed: the key was already completed, the function did not run
	// and Response is the stored response.
	Replayed bool
	// Executed: the function ran in this call.
	Executed bool
	// Action is what was done with the key after the function ran.
	Action Action
	// Token is the fencing token of the claim that ran the function, or of
	// the completion that was replayed.
	Token uint64
	// CompletedAt is when the replayed response was stored.
	CompletedAt time.Time
}

// Do runs fn at most once for id and fingerprint, and answers every other
// call with what the run stored:
//
//   - It claims id (retrying transient errors with the same owner). When the
//     key is already completed it returns the stored response with Replayed
//     set, without running fn. When another holder runs it, the server holds
//     the claim up to the wait (WithWait, default Config.Wait) and answers
//     with that holder's response, or lets this call run fn when the holder
//     released the key or died; when the wait ends first, Do returns an
//     *InProgressError. A key reused with another fingerprint is ErrMismatch;
//     a key whose record is a tombstone (it ran before the TTL ended, and
//     the server keeps tombstones) is an *ExpiredError (ErrExpired): fn does
//     not run.
//   - While fn runs, Do extends the lease every third of it. If the lease is
//     lost anyway (fn outlived a partition), fn's context is cancelled with
//     cause ErrFenced.
//   - When fn returns, the classifier picks Complete (the response is stored
//     and replayed) or Release (the next call runs fn again). Do returns fn's
//     own error unchanged, with the Result; a permanent failure is replayed
//     later as its Response only, with a nil error, so put in the Response
//     what a retry must see.
//   - If fn panics, Do releases the key and panics again with the same value.
//
// Recording the result runs even when ctx is cancelled, bounded by
// Config.FinishTimeout. If it fails, Do returns an error beside a Result
// whose Executed is set: the side effect happened.
func (c *Client) Do(ctx context.Context, id ID, fingerprint []byte, fn func(context.Context) (Response, error), opts ...Option) (Result, error) {
	o := c.options(c.cfg.Wait, opts)
	claim, err := c.claim(ctx, id, fingerprint, o)
	if err != nil {
		return Result{}, fmt.Errorf("do: %w", err)
	}
	switch claim.Outcome {
	case OutcomeWon:
		return c.run(ctx, &Run{c: c, id: id, token: claim.Token, resume: claim.RecoveryPoint}, fn, o)
	case OutcomeCompleted:
		res := Result{Replayed: true, Token: claim.Token, CompletedAt: claim.CompletedAt}
		if claim.Response != nil {
			res.Response = *claim.Response
		}
		return res, nil
	case OutcomeInProgress:
		return Result{}, &InProgressError{ID: id, LeaseExpiresAt: claim.LeaseExpiresAt, ExpiresAt: claim.ExpiresAt}
	case OutcomeMismatch:
		return Result{}, fmt.Errorf("do %s: %w", id, ErrMismatch)
	case OutcomeExpired:
		return Result{}, &ExpiredError{ID: id, ExpiresAt: claim.ExpiresAt, CompletedAt: claim.CompletedAt}
	}
	return Result{}, fmt.Errorf("do %s: unexpected claim outcome %s", id, claim.Outcome)
}

// run executes fn as the holder of the claim r and records what it returned.
func (c *Client) run(ctx context.Context, r *Run, fn func(context.Context) (Response, error), o callOptions) (Result, error) {
	id, token := r.id, r.token
	runCtx, cancel := context.WithCancelCause(context.WithValue(ctx, runKey{}, r))
	defer cancel(nil)
	stopExtending := c.keepLease(runCtx, cancel, id, token, o.lease)
	returned := false
	defer func() {
		if returned {
			return
		}
		// fn panicked (or called runtime.Goexit): the side effect may be
		// half done, which is a transient failure; let a retry run it.
		p := recover()
		stopExtending()
		if _, err := c.finish(ctx, id, token, Release, Response{}); err != nil {
			c.cfg.Logger.Error("idemnode: release after panic failed; the key stays claimed until its lease ends", "id", id.String(), "err", err)
		}
		if p != nil {
			panic(p)
		}
	}()
	resp, fnErr := fn(runCtx)
	returned = true
	stopExtending()

	res := Result{Response: resp, Executed: true, Token: token, Action: o.classify(resp, fnErr)}
	outcome, err := c.finish(ctx, id, token, res.Action, resp)
	if err != nil && res.Action == Complete && status.Code(err) == codes.InvalidArgument {
		// The server refuses to store this response (too large, too many
		// headers): release, so retries run fn again instead of finding
		// the key stuck in PENDING until the lease ends.
		res.Action = Release
		if _, relErr := c.finish(ctx, id, token, Release, resp); relErr != nil {
			err = errors.Join(err, relErr)
		}
	}
	switch {
	case err != nil:
		return res, errors.Join(fnErr, fmt.Errorf("do %s: record the result: %w", id, err))
	case outcome == OutcomeFenced || outcome == OutcomeNotFound:
		// Release of a record someone else took over is harmless, but a
		// lost completion means another holder may run fn again.
		if res.Action == Release {
			return res, fnErr
		}
		return res, errors.Join(fnErr, fmt.Errorf("do %s: complete answered %s: %w", id, outcome, ErrFenced))
	case outcome != OutcomeOK:
		return res, errors.Join(fnErr, fmt.Errorf("do %s: complete answered %s", id, outcome))
	}
	return res, fnErr
}

// runKey carries the *Run fn runs under.
type runKey struct{}

// Run is the claim Do runs fn under, read from fn's context with RunFrom.
// A multi-step operation records each step it finishes with Checkpoint; if
// the run dies between steps, the call that takes the record over runs fn
// again, and Resume tells fn which steps are done and what they produced:
//
//	run, _ := client.RunFrom(ctx)
//	charge, resumed := run.Resume()
//	if !resumed || charge.Name != "charged" {
//		id, err := payments.Charge(ctx, ...)
//		...
//		if err := run.Checkpoint(ctx, "charged", []byte(id)); err != nil { ... }
//	}
//	receipts.Send(ctx, ...)
type Run struct {
	c      *Client
	id     ID
	token  uint64
	resume *RecoveryPoint
}

// RunFrom returns the Run that Do runs fn under; ok is false outside fn.
func RunFrom(ctx context.Context) (r *Run, ok bool) {
	r, ok = ctx.Value(runKey{}).(*Run)
	return r, ok
}

// Token is the fencing token of the claim: fn can pass it on (to a log
// line, a downstream system that rejects stale tokens).
func (r *Run) Token() uint64 { return r.token }

// ID is the record the run holds.
func (r *Run) ID() ID { return r.id }

// Resume returns the recovery point this run took over from: the last step
// a previous holder recorded as done, and its data. ok is false on a first
// attempt, or when the previous holder recorded none.
func (r *Run) Resume() (point RecoveryPoint, ok bool) {
	if r.resume == nil {
		return RecoveryPoint{}, false
	}
	return *r.resume, true
}

// Checkpoint records that step point is done, with the data resuming after
// it needs (up to 64 KiB). Calling it again with the same point and data is
// harmless. It returns an error wrapping ErrFenced when the run no longer
// holds the record (stop: another holder runs), and one wrapping
// ErrMismatch when point was recorded with other data.
func (r *Run) Checkpoint(ctx context.Context, point string, data []byte) error {
	outcome, err := r.c.Checkpoint(ctx, r.id, r.token, point, data)
	switch {
	case err != nil:
		return err
	case outcome == OutcomeFenced || outcome == OutcomeNotFound:
		return fmt.Errorf("checkpoint %s of %s: %s: %w", point, r.id, outcome, ErrFenced)
	case outcome == OutcomeExpired:
		return fmt.Errorf("checkpoint %s of %s: %w", point, r.id, ErrExpired)
	case outcome == OutcomeMismatch:
		return fmt.Errorf("checkpoint %s of %s: recorded before with other data: %w", point, r.id, ErrMismatch)
	case outcome != OutcomeOK:
		return fmt.Errorf("checkpoint %s of %s: %s", point, r.id, outcome)
	}
	return nil
}

// HolderToken is the fencing token of the claim that Do runs fn under, read
// from fn's context (RunFrom(ctx).Token()). ok is false outside fn.
func HolderToken(ctx context.Context) (token uint64, ok bool) {
	r, ok := RunFrom(ctx)
	if !ok {
		return 0, false
	}
	return r.token, true
}

// finish completes or releases the key. It outlives ctx's cancellation:
// the function ran, and recording that is what keeps it from running again.
func (c *Client) finish(ctx context.Context, id ID, token uint64, a Action, resp Response) (Outcome, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.FinishTimeout)
	defer cancel()
	if a == Release {
		return c.Release(ctx, id, token)
	}
	return c.Complete(ctx, id, token, resp)
}

// keepLease extends the lease every third of it until stop is called. When
// the record is no longer held (FENCED or NOT_FOUND), it cancels the run
// with cause ErrFenced; a failed extension is retried at the next tick,
// while two thirds of the lease are still left.
func (c *Client) keepLease(ctx context.Context, lost context.CancelCauseFunc, id ID, token uint64, lease time.Duration) (stop func()) {
	every := lease / 3
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ectx, cancel := context.WithTimeout(ctx, every)
			r, err := c.Extend(ectx, id, token, lease)
			cancel()
			switch {
			case err != nil:
				c.cfg.Logger.Warn("idemnode: lease extension failed; retrying at the next tick", "id", id.String(), "err", err)
			case r.Outcome != OutcomeOK:
				lost(fmt.Errorf("%w: extend answered %s", ErrFenced, r.Outcome))
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
