package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// AllTenants names every tenant in WatchAbandoned and ListAbandoned (an
// admin identity, or any caller of a cluster without --auth).
const AllTenants = "*"

// AbandonedEvent is one event of the feed of abandoned claims (docs/API.md,
// "Abandoned claims").
type AbandonedEvent struct {
	// Seq numbers every event of the cluster in one increasing sequence.
	Seq uint64
	// Kind is "abandoned" (the lease ran out while PENDING, without a
	// completion or release: the side effect may or may not have run) or
	// "resolved" (Resolution says how, ResolvesSeq which event it settles).
	Kind        string
	Resolution  string // completed, released, taken_over or expired
	ResolvesSeq uint64
	ID          ID
	Token       uint64
	Attempt     uint32
	// RecoveryPoint is the record's last recovery point, "" when none.
	RecoveryPoint  string
	LeaseExpiresAt time.Time
	At             time.Time
	KeepUntil      time.Time
}

// FeedUpdate is what WatchAbandoned hands over at a time: events in
// increasing Seq, and CaughtUpSeq, the cursor to keep. Every event of the
// watched tenant numbered up to CaughtUpSeq is delivered.
type FeedUpdate struct {
	Events      []AbandonedEvent
	CaughtUpSeq uint64
}

// WatchAbandoned streams the feed of tenant ("" the caller's, AllTenants
// every tenant's) from the first event after after, calling fn with each
// update until ctx ends or fn returns an error (which it returns). It
// follows the cluster across node failures, resuming from the last cursor
// fn was given, so fn sees no event twice and misses none; store
// CaughtUpSeq after fn handled an update and pass it as after when the
// watcher restarts. It returns ErrFeedPruned when events after the cursor
// are gone, and a *FeedCursorAheadError when the cursor is past the
// cluster's last event (docs/API.md); neither is retried.
func (c *Client) WatchAbandoned(ctx context.Context, tenant string, after uint64, fn func(FeedUpdate) error, opts ...WatchOption) error {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	cursor := after
	for n := 0; ; n++ {
		addr := c.target(ctx, toLeader)
		conn, err := c.conn(addr)
		if err != nil {
			return err
		}
		progressed, err := c.watchOnce(ctx, conn, tenant, &cursor, fn)
		var failed *callbackError
		switch {
		case errors.As(err, &failed):
			return failed.err
		case ctx.Err() != nil:
			return ctx.Err()
		case !retryable(ctx, err) && !errors.Is(err, io.EOF):
			return fmt.Errorf("watch abandoned: %w", classify(err))
		}
		if progressed {
			n = 0
		}
		if o.onResume != nil {
			o.onResume(addr, err, cursor)
		}
		c.forget(addr)
		if !sleep(ctx, c.backoff(n)) {
			return ctx.Err()
		}
	}
}

// WatchOption adjusts WatchAbandoned.
type WatchOption func(*watchOptions)

type watchOptions struct {
	onResume func(addr string, err error, cursor uint64)
}

// OnResume has WatchAbandoned call fn each time the stream from addr ended
// with err (a node that went away, a lost connection) and the watch is
// about to resume after cursor, on the same node or another: the idemnode
// CLI says so on stderr. fn runs on WatchAbandoned's goroutine.
func OnResume(fn func(addr string, err error, cursor uint64)) WatchOption {
	return func(o *watchOptions) { o.onResume = fn }
}

// FeedCursorAheadError refuses a cursor past the cluster's last feed
// event; errors.Is(err, ErrFeedCursorAhead) holds. The cluster lacks the
// events after LastSeq that the cursor counted (it was restored from an
// older backup, or is another cluster), and numbers its next events from
// LastSeq+1: list the records abandoned now (ListAbandoned) to reconcile,
// then watch again after LastSeq. A node that merely lags behind the
// leader where the cursor was taken does not refuse it.
type FeedCursorAheadError struct {
	// Cursor is the cursor refused; LastSeq the cluster's last event.
	Cursor, LastSeq uint64
	err             error // the server's status
}

// Error says which cursor was refused and where the feed ends.
func (e *FeedCursorAheadError) Error() string {
	return fmt.Sprintf("%v (cursor %d, last event %d): %s", ErrFeedCursorAhead, e.Cursor, e.LastSeq, status.Convert(e.err).Message())
}

// Is reports whether target is ErrFeedCursorAhead.
func (e *FeedCursorAheadError) Is(target error) bool { return target == ErrFeedCursorAhead }

// Unwrap returns the server's status error.
func (e *FeedCursorAheadError) Unwrap() error { return e.err }

// cursorAheadOf reads a FEED_CURSOR_AHEAD refusal's metadata.
func cursorAheadOf(info *errdetails.ErrorInfo, err error) error {
	last, lerr := strconv.ParseUint(info.GetMetadata()["last_seq"], 10, 64)
	cursor, cerr := strconv.ParseUint(info.GetMetadata()["cursor"], 10, 64)
	if lerr != nil || cerr != nil {
		return fmt.Errorf("%w: %w (metadata %v)", ErrFeedCursorAhead, err, info.GetMetadata())
	}
	return &FeedCursorAheadError{Cursor: cursor, LastSeq: last, err: err}
}

// callbackError carries an error of the caller's fn out of the stream.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// watchOnce runs one stream from *cursor and moves the cursor as updates
// are handed to fn; progressed says at least one was.
func (c *Client) watchOnce(ctx context.Context, conn *grpc.ClientConn, tenant string, cursor *uint64, fn func(FeedUpdate) error) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := idempb.NewIdempotencyClient(conn).WatchAbandoned(ctx, &idempb.WatchAbandonedRequest{Tenant: tenant, AfterSeq: *cursor})
	if err != nil {
		return false, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return progressed, err
		}
		progressed = true
		up := FeedUpdate{CaughtUpSeq: msg.GetCaughtUpSeq()}
		for _, ev := range msg.GetEvents() {
			if ev.GetSeq() > *cursor {
				up.Events = append(up.Events, abandonedEventOf(ev))
			}
		}
		if len(up.Events) == 0 && up.CaughtUpSeq <= *cursor {
			continue // the stream's start, or a heartbeat
		}
		if err := fn(up); err != nil {
			return progressed, &callbackError{err}
		}
		*cursor = up.CaughtUpSeq
	}
}

// ListAbandoned returns a page of the records abandoned now, as the event
// that reported each, and the after to pass for the next page (0: last
// page). tenant is as for WatchAbandoned; pageSize 0 is 100.
func (c *Client) ListAbandoned(ctx context.Context, tenant string, after uint64, pageSize int) ([]AbandonedEvent, uint64, error) {
	var resp *idempb.ListAbandonedResponse
	err := c.call(ctx, toLeader, 0, func(ctx context.Context, conn *grpc.ClientConn, _ time.Duration) error {
		var err error
		resp, err = idempb.NewIdempotencyClient(conn).ListAbandoned(ctx,
			&idempb.ListAbandonedRequest{Tenant: tenant, AfterSeq: after, PageSize: uint32(pageSize)})
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list abandoned: %w", err)
	}
	out := make([]AbandonedEvent, 0, len(resp.GetRecords()))
	for _, ev := range resp.GetRecords() {
		out = append(out, abandonedEventOf(ev))
	}
	return out, resp.GetNextAfterSeq(), nil
}

func abandonedEventOf(ev *idempb.AbandonedEvent) AbandonedEvent {
	id := ev.GetId()
	out := AbandonedEvent{
		Seq: ev.GetSeq(), ResolvesSeq: ev.GetResolvesSeq(),
		ID:    ID{Tenant: id.GetTenant(), Scope: id.GetScope(), Key: id.GetKey()},
		Token: ev.GetToken(), Attempt: ev.GetAttempt(), RecoveryPoint: ev.GetRecoveryPoint(),
		LeaseExpiresAt: timeOf(ev.GetLeaseExpiresAt()), At: timeOf(ev.GetAt()), KeepUntil: timeOf(ev.GetKeepUntil()),
	}
	switch ev.GetKind() {
	case idempb.AbandonedEvent_KIND_ABANDONED:
		out.Kind = "abandoned"
	case idempb.AbandonedEvent_KIND_RESOLVED:
		out.Kind = "resolved"
	}
	if r := ev.GetResolution(); r != idempb.AbandonedEvent_RESOLUTION_UNSPECIFIED {
		out.Resolution = resolutionNames[r]
	}
	return out
}

var resolutionNames = map[idempb.AbandonedEvent_Resolution]string{
	idempb.AbandonedEvent_RESOLUTION_COMPLETED:  "completed",
	idempb.AbandonedEvent_RESOLUTION_RELEASED:   "released",
	idempb.AbandonedEvent_RESOLUTION_TAKEN_OVER: "taken_over",
	idempb.AbandonedEvent_RESOLUTION_EXPIRED:    "expired",
}
