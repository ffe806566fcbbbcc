package client

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors; test for them with errors.Is.
var (
	// ErrMismatch means the key is in use by a request with another
	// fingerprint (HTTP 422): the caller reused a key for a different request.
	ErrMismatch = errors.New("idempotency key reused with a different request")
	// ErrInProgress means another holder is running the operation and the
	// wait ended first; the error is an *InProgressError.
	ErrInProgress = errors.New("operation in progress")
	// ErrFenced means the caller no longer holds the record: its lease ran
	// out and another claim took the record over, or the record is gone.
	ErrFenced = errors.New("lease lost: the record is held by another claim")
	// ErrExpired means the key's record is a tombstone: the operation ran
	// (or may have: it expired PENDING) before the key's TTL ended, and its
	// response is gone. Running it again could repeat the side effect; the
	// error is an *ExpiredError saying when.
	ErrExpired = errors.New("idempotency key expired: the operation ran or may have, and its response is gone")
	// ErrNotFound means no live record exists under the key.
	ErrNotFound = errors.New("record not found")
	// ErrTooManyWaits means the server refused to hold another waiting call
	// (ResourceExhausted, reason TOO_MANY_WAITS); try again later or
	// without waiting.
	ErrTooManyWaits = errors.New("too many waiting calls")
	// ErrRateLimited means the tenant claims faster than the server's
	// per-tenant rate (ResourceExhausted, reason RATE_LIMITED); RetryAfter
	// says when to try again.
	ErrRateLimited = errors.New("tenant rate limit exceeded")
	// ErrQuotaExceeded means the claim or completion would take the tenant
	// past its quota of stored keys or bytes (ResourceExhausted, reason
	// QUOTA_EXCEEDED); nothing was stored. Space frees up as records are
	// released or expire.
	ErrQuotaExceeded = errors.New("tenant quota exceeded")
	// ErrUnavailable means the cluster could not be reached, or had no
	// leader, until the caller's deadline; the error also wraps the last
	// gRPC status.
	ErrUnavailable = errors.New("idemnode unavailable")
	// ErrFeedPruned means events after the cursor given to WatchAbandoned
	// were pruned before they were read: list the records abandoned now
	// (ListAbandoned) and watch again from the oldest event kept (after 0).
	ErrFeedPruned = errors.New("abandoned feed pruned past the cursor")
	// ErrFeedCursorAhead means the cursor given to WatchAbandoned or
	// ListAbandoned is past the cluster's last feed event (OutOfRange,
	// reason FEED_CURSOR_AHEAD): the cluster was restored from an older
	// backup, or is another cluster. The error is a *FeedCursorAheadError
	// with the last event; retrying with the same cursor never helps.
	ErrFeedCursorAhead = errors.New("abandoned feed cursor ahead of the cluster's feed")
)

// InProgressError reports that another holder runs the operation.
type InProgressError struct {
	ID ID
	// LeaseExpiresAt is when the holder's lease ends unless it extends it.
	LeaseExpiresAt time.Time
	// ExpiresAt is when the record expires (its TTL).
	ExpiresAt time.Time
}

// Error says which key is in progress and until when its lease runs.
func (e *InProgressError) Error() string {
	return fmt.Sprintf("%s: %v (lease until %s)", e.ID, ErrInProgress, e.LeaseExpiresAt.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrInProgress) hold.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// ExpiredError reports a key whose record is a tombstone.
type ExpiredError struct {
	ID ID
	// ExpiresAt is when the record expired.
	ExpiresAt time.Time
	// CompletedAt is when it completed; zero when it expired PENDING (its
	// outcome is unknown).
	CompletedAt time.Time
}

// Error says which key expired, when, and whether it had completed.
func (e *ExpiredError) Error() string {
	how := "expired pending (outcome unknown)"
	if !e.CompletedAt.IsZero() {
		how = "completed at " + e.CompletedAt.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s: %v: %s, expired at %s", e.ID, ErrExpired, how, e.ExpiresAt.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrExpired) hold.
func (e *ExpiredError) Is(target error) bool { return target == ErrExpired }

// permanentError marks a failure that is stored and replayed.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a permanent failure (a declined card, a validation
// error): Do's default classifier completes the key with the Response the
// function returned beside it, so every retry is answered with that
// response instead of running the function again.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
