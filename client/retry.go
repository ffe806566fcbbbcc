package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// attemptFunc sends one attempt over conn; wait is what is left of the
// call's wait window (0 for calls that do not wait).
type attemptFunc func(ctx context.Context, conn *grpc.ClientConn, wait time.Duration) error

// call runs attempt until it succeeds, fails for good, or ctx ends. Every
// idemnode operation is safe to send twice, so any Unavailable answer is
// retried: the attempt may or may not have taken effect, and the retry
// returns the same answer if it did (claims carry the same owner, completes
// the same token and response). waitFor > 0 is the server-side wait the
// call asks for; retries ask for what remains of it.
//
// A OneShot client sends it to the listed nodes in turn instead
// (Endpoints.Call), asking for the whole wait.
func (c *Client) call(ctx context.Context, r route, waitFor time.Duration, attempt attemptFunc) error {
	if c.oneShot != nil {
		return c.oneShot.Call(ctx, func(ctx context.Context, conn *grpc.ClientConn) error { return attempt(ctx, conn, waitFor) })
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout+waitFor)
		defer cancel()
	}
	waitEnd := time.Now().Add(waitFor)
	for n := 0; ; n++ {
		addr := c.target(ctx, r)
		conn, err := c.conn(addr)
		if err != nil {
			return err
		}
		wait := waitLeft(ctx, waitEnd, waitFor > 0)
		actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout+wait)
		err = attempt(actx, conn, wait)
		cancel()
		if err == nil {
			return nil
		}
		if !retryable(ctx, err) {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && passing(err) {
				// The caller's deadline ended inside an attempt that found
				// no node to answer: as unreachable as one ending in the
				// backoff below, and said the same way.
				return fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			return classify(err)
		}
		c.forget(addr)
		if !sleep(ctx, c.backoff(n)) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
}

// waitLeft is the wait to ask the server for: what remains of the window,
// cut so that the server answers IN_PROGRESS before the caller's deadline
// rather than the deadline cutting the call off.
func waitLeft(ctx context.Context, end time.Time, waits bool) time.Duration {
	if !waits {
		return 0
	}
	w := time.Until(end)
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		w = min(w, left-min(250*time.Millisecond, left/10))
	}
	return max(w, time.Millisecond) // 0 would mean "the server's default"
}

// retryable reports whether err is worth another attempt within ctx.
func retryable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && passing(err)
}

// passing reports whether err says the attempt reached no node that
// answered, which another attempt may get past.
func passing(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		return true
	case codes.DeadlineExceeded:
		// With the caller's ctx alive, the attempt's own timeout: the node
		// hung, another may answer.
		return true
	case codes.Canceled:
		// With the caller's ctx alive, the connection was closed under the
		// attempt, as when discovery finds an advertised address
		// unreachable (reachable); the next attempt goes elsewhere.
		return true
	}
	return false
}

// classify adds the SDK's sentinels to a final gRPC error.
func classify(err error) error {
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.ResourceExhausted && st.Code() != codes.OutOfRange) {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok {
			continue
		}
		switch info.GetReason() {
		case ReasonTooManyWaits:
			return fmt.Errorf("%w: %w", ErrTooManyWaits, err)
		case ReasonRateLimited:
			return fmt.Errorf("%w: %w", ErrRateLimited, err)
		case ReasonQuotaExceeded:
			return fmt.Errorf("%w: %w", ErrQuotaExceeded, err)
		case ReasonFeedPruned:
			return fmt.Errorf("%w: %w", ErrFeedPruned, err)
		case ReasonFeedCursorAhead:
			return cursorAheadOf(info, err)
		}
	}
	return err
}

// RetryAfter returns the delay the server advised before trying a refused
// call again (the RetryInfo of a RATE_LIMITED or QUOTA_EXCEEDED answer).
func RetryAfter(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok {
			return info.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// backoff returns the delay before retry n: a uniform draw below
// min(MaxBackoff, MinBackoff·2ⁿ) (exponential backoff with full jitter),
// and never less than MinBackoff/2, so a retry never spins.
func (c *Client) backoff(n int) time.Duration {
	ceiling := c.cfg.MaxBackoff
	if n < 30 {
		ceiling = min(c.cfg.MaxBackoff, c.cfg.MinBackoff<<n)
	}
	floor := c.cfg.MinBackoff / 2
	return floor + rand.N(max(ceiling-floor, 1))
}

// sleep waits d unless ctx ends first or would end before d has passed;
// it reports whether the caller should try again.
func sleep(ctx context.Context, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
