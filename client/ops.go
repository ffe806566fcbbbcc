package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// newOwner returns a fresh claim nonce: 128 random bits in hex.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Claim claims id for the request identified by fingerprint. The answer is
// an outcome: WON (run the side effect, then Complete or Release with the
// token), COMPLETED (the stored response: do not run it again),
// IN_PROGRESS (another holder runs it), or MISMATCH (the key belongs to a
// different request). Every retry of this call sends the same owner, so a
// WON whose answer was lost is answered WON with the same token again.
// Options: WithLease, WithTTL, WithWait (Claim does not wait by default),
// WithOwner.
func (c *Client) Claim(ctx context.Context, id ID, fingerprint []byte, opts ...Option) (ClaimResult, error) {
	return c.claim(ctx, id, fingerprint, c.options(0, opts))
}

func (c *Client) claim(ctx context.Context, id ID, fingerprint []byte, o callOptions) (ClaimResult, error) {
	owner := o.owner
	if err := errors.Join(id.check(), textFields("owner", owner)); err != nil {
		return ClaimResult{Owner: owner}, fmt.Errorf("claim %s: %w", id, err)
	}
	var resp *idempb.ClaimResponse
	err := c.call(ctx, toLeader, o.wait, func(ctx context.Context, conn *grpc.ClientConn, wait time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).Claim(ctx, &idempb.ClaimRequest{Id: id.proto(), Fingerprint: fingerprint,
			Owner: owner, Lease: durationOf(o.lease), Ttl: durationOf(o.ttl), Wait: durationOf(wait)})
		return err
	})
	if err != nil {
		return ClaimResult{Owner: owner}, fmt.Errorf("claim %s: %w", id, err)
	}
	return ClaimResult{
		Outcome:        Outcome(resp.GetOutcome()),
		Token:          resp.GetToken(),
		Attempt:        resp.GetAttempt(),
		LeaseExpiresAt: timeOf(resp.GetLeaseExpiresAt()),
		ExpiresAt:      timeOf(resp.GetExpiresAt()),
		Response:       responseOf(resp.GetResponse()),
		CompletedAt:    timeOf(resp.GetCompletedAt()),
		Owner:          owner,
		RecoveryPoint:  recoveryPointOf(resp.GetRecoveryPoint()),
	}, nil
}

// Complete stores the holder's response under its token: OK, or FENCED
// when the token no longer holds the record (the lease was lost), or
// NOT_FOUND. A retried Complete with the same response answers OK.
func (c *Client) Complete(ctx context.Context, id ID, token uint64, response Response) (Outcome, error) {
	if err := errors.Join(id.check(), response.check()); err != nil {
		return OutcomeUnspecified, fmt.Errorf("complete %s: %w", id, err)
	}
	var resp *idempb.CompleteResponse
	err := c.call(ctx, toLeader, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).Complete(ctx, &idempb.CompleteRequest{Id: id.proto(), Token: token, Response: response.proto()})
		return err
	})
	if err != nil {
		return OutcomeUnspecified, fmt.Errorf("complete %s: %w", id, err)
	}
	return Outcome(resp.GetOutcome()), nil
}

// Release gives up the holder's PENDING record after a transient failure,
// so that the next claim runs the side effect again: OK (also when the
// record is already gone or given up), FENCED, or EXPIRED. The record is
// deleted, unless it has a recovery point: then it is kept without a
// holder, and the next claim takes it over at once and resumes after the
// point.
func (c *Client) Release(ctx context.Context, id ID, token uint64) (Outcome, error) {
	if err := id.check(); err != nil {
		return OutcomeUnspecified, fmt.Errorf("release %s: %w", id, err)
	}
	var resp *idempb.ReleaseResponse
	err := c.call(ctx, toLeader, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).Release(ctx, &idempb.ReleaseRequest{Id: id.proto(), Token: token})
		return err
	})
	if err != nil {
		return OutcomeUnspecified, fmt.Errorf("release %s: %w", id, err)
	}
	return Outcome(resp.GetOutcome()), nil
}

// Extend pushes the holder's lease to lease from now (0: Config.Lease):
// OK with the new end, or FENCED.
func (c *Client) Extend(ctx context.Context, id ID, token uint64, lease time.Duration) (ExtendResult, error) {
	if err := id.check(); err != nil {
		return ExtendResult{}, fmt.Errorf("extend %s: %w", id, err)
	}
	lease = or(lease, c.cfg.Lease)
	var resp *idempb.ExtendResponse
	err := c.call(ctx, toLeader, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).Extend(ctx, &idempb.ExtendRequest{Id: id.proto(), Token: token, Lease: durationOf(lease)})
		return err
	})
	if err != nil {
		return ExtendResult{}, fmt.Errorf("extend %s: %w", id, err)
	}
	return ExtendResult{Outcome: Outcome(resp.GetOutcome()), LeaseExpiresAt: timeOf(resp.GetLeaseExpiresAt())}, nil
}

// Checkpoint stores a recovery point on the PENDING record token holds: the
// step point is done, and data is what resuming after it needs. OK (stored,
// or already stored with the same data), FENCED (another claim holds the
// record, it is completed, or token released it), MISMATCH (point was
// stored with other data), NOT_FOUND, or EXPIRED (a tombstone). A claim that takes the record over gets the last point back
// (ClaimResult.RecoveryPoint).
func (c *Client) Checkpoint(ctx context.Context, id ID, token uint64, point string, data []byte) (Outcome, error) {
	if err := errors.Join(id.check(), textFields("point", point)); err != nil {
		return OutcomeUnspecified, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	var resp *idempb.CheckpointResponse
	err := c.call(ctx, toLeader, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).Checkpoint(ctx, &idempb.CheckpointRequest{Id: id.proto(), Token: token, Point: point, Data: data})
		return err
	})
	if err != nil {
		return OutcomeUnspecified, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	return Outcome(resp.GetOutcome()), nil
}

// ReadOption tunes Get and Wait.
type ReadOption func(*readOptions)

type readOptions struct{ stale bool }

// Stale serves the read from whichever node answers, without confirming
// leadership: faster, but it may miss the latest writes.
func Stale() ReadOption { return func(o *readOptions) { o.stale = true } }

func readOpts(opts []ReadOption) (route, idempb.Consistency) {
	var o readOptions
	for _, f := range opts {
		f(&o)
	}
	if o.stale {
		return toAny, idempb.Consistency_CONSISTENCY_STALE
	}
	return toLeader, idempb.Consistency_CONSISTENCY_LINEARIZABLE
}

// Get returns the record under id, or ErrNotFound. Reads are linearizable
// unless Stale is given.
func (c *Client) Get(ctx context.Context, id ID, opts ...ReadOption) (*Record, error) {
	if err := id.check(); err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	r, consistency := readOpts(opts)
	var resp *idempb.GetResponse
	err := c.call(ctx, r, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).Get(ctx, &idempb.GetRequest{Id: id.proto(), Consistency: consistency})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	if resp.GetOutcome() == idempb.Outcome_OUTCOME_NOT_FOUND {
		return nil, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	return recordOf(resp.GetRecord()), nil
}

// Wait returns when the record under id leaves PENDING, or after timeout
// (0 is Config.Wait; cut to answer before ctx's deadline). The server holds the call and the
// state machine wakes it; a leader change while waiting is retried here
// with what remains of the timeout.
func (c *Client) Wait(ctx context.Context, id ID, timeout time.Duration, opts ...ReadOption) (WaitResult, error) {
	if err := id.check(); err != nil {
		return WaitResult{}, fmt.Errorf("wait %s: %w", id, err)
	}
	r, consistency := readOpts(opts)
	if timeout <= 0 {
		timeout = c.cfg.Wait
	}
	var resp *idempb.WaitResponse
	err := c.call(ctx, r, timeout, func(ctx context.Context, conn *grpc.ClientConn, wait time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).Wait(ctx, &idempb.WaitRequest{Id: id.proto(), Timeout: durationOf(wait), Consistency: consistency})
		return err
	})
	if err != nil {
		return WaitResult{}, fmt.Errorf("wait %s: %w", id, err)
	}
	return WaitResult{Outcome: Outcome(resp.GetOutcome()), Record: recordOf(resp.GetRecord())}, nil
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
