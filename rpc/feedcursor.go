package rpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// A feed cursor past the last event a node has applied is either ahead of
// that node only (a follower that lags behind the leader where the cursor
// was taken) or ahead of the whole cluster: a cursor kept from before the
// cluster was restored from an older backup, or from another cluster. The
// first must be served once the node catches up; the second refused, or
// the reconciler that holds it is told "caught up" while every event up to
// its cursor goes by unseen. Only the leader, after a read barrier, knows
// the cluster's last event: a follower asks it.

// errCursorAhead refuses a cursor past the cluster's last feed event.
type errCursorAhead struct{ cursor, last uint64 }

func (e *errCursorAhead) Error() string {
	return fmt.Sprintf("the cursor %d is ahead of the abandoned feed, whose last event is %d: the cluster was "+
		"restored from an older backup (or is another cluster) and lacks the events after %d the cursor counted; "+
		"list the records abandoned now (ListAbandoned), then watch again from %d", e.cursor, e.last, e.last, e.last)
}

// feedCursorWithin refuses cursor if it is past the cluster's last feed
// event. On the leader it confirms leadership and waits until everything
// committed is applied, so the local feed is the cluster's; elsewhere it
// returns the barrier's ErrNotLeader, and the caller asks the leader.
func (s *Server) feedCursorWithin(ctx context.Context, cursor uint64) error {
	if err := s.backend.LinearizableBarrier(ctx); err != nil {
		return err
	}
	if last := s.backend.Machine().Meta().Feed.Seq; cursor > last {
		return &errCursorAhead{cursor: cursor, last: last}
	}
	return nil
}

// checkFeedCursor refuses a watch whose cursor is ahead of the cluster's
// feed, as a gRPC status. A cursor within this node's feed, the common
// case, costs nothing; one past it costs a read barrier on the leader (a
// follower forwards a one-record ListAbandoned after the same cursor, which
// the leader refuses the same way). A cursor that passes may still be
// ahead of this node: the watch then waits until the node has applied it.
func (s *Server) checkFeedCursor(ctx context.Context, scope feedScope, cursor uint64) error {
	if cursor <= s.backend.Machine().Meta().Feed.Seq {
		return nil
	}
	_, err := routed(ctx, s, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.feedCursorWithin(ctx, cursor)
	}, viaUnary(s, func(ctx context.Context, c *grpc.ClientConn) (struct{}, error) {
		_, err := idempb.NewIdempotencyClient(c).ListAbandoned(ctx,
			&idempb.ListAbandonedRequest{Tenant: scope.arg(), AfterSeq: cursor, PageSize: 1})
		return struct{}{}, err
	}))
	return err
}
