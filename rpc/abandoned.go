package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The feed of abandoned claims (fsm/abandon.go) is served by the node
// called, from what it has applied: every node numbers the events alike,
// so a cursor taken on one node resumes on any other. A cursor past this
// node's last event is ahead of the cluster only if a read barrier says so
// (feedcursor.go).

const (
	// allTenants names every tenant in a feed request (admin identities).
	allTenants = "*"
	// feedBatch bounds the events one stream message carries.
	feedBatch = 256
	// feedHeartbeat: an idle stream repeats its cursor this often, so a
	// client notices a dead connection and keeps a fresh cursor.
	feedHeartbeat = 15 * time.Second
	// listScan bounds the events one ListAbandoned call reads.
	listScan                     = 10000
	defaultPageSize, maxPageSize = 100, 1000
)

// feedScope is whose events a feed call gets: tenant, or every tenant.
type feedScope struct {
	tenant string
	all    bool
}

func (f feedScope) has(ev *fsm.Event) bool { return f.all || ev.Tenant == f.tenant }

// arg is the scope as a request's tenant field names it. A call forwarded
// to the leader names the scope resolved here: the leader sees a peer, not
// the caller, so an empty tenant would be the peer's (none).
func (f feedScope) arg() string {
	if f.all {
		return allTenants
	}
	return f.tenant
}

// scopeOf resolves a feed request's tenant against the caller: empty is
// the caller's tenant, "*" every tenant (an admin, or any caller without
// --auth), another tenant needs an admin or a delegate.
func (s *Server) scopeOf(ctx context.Context, tenant string) (feedScope, error) {
	id, authenticated := IdentityFrom(ctx)
	if tenant == allTenants {
		if authenticated && !id.Admin && !id.Peer {
			return feedScope{}, &authError{codes.PermissionDenied, idempb.ReasonAdminRequired,
				fmt.Sprintf("the feed of every tenant needs an admin identity; tenant %q is not one", id.Tenant)}
		}
		return feedScope{all: true}, nil
	}
	if err := checkASCII("tenant", tenant, 0, s.limits.MaxTenant, '!', ruleTenant); err != nil {
		return feedScope{}, err
	}
	if !authenticated {
		return feedScope{tenant: tenant}, nil
	}
	switch {
	case tenant == "":
		tenant = id.Tenant
	case tenant != id.Tenant && !id.Admin && !id.Delegate && !id.Peer:
		return feedScope{}, &authError{codes.PermissionDenied, idempb.ReasonTenantMismatch,
			fmt.Sprintf("the request names tenant %q, the credentials tenant %q", tenant, id.Tenant)}
	}
	return feedScope{tenant: tenant}, nil
}

// errPruned refuses a cursor whose following events are gone.
type errPruned struct{ cursor, pruned uint64 }

func (e *errPruned) Error() string {
	return fmt.Sprintf("events after %d up to %d were pruned (kept: docs/API.md, \"Abandoned claims\"); "+
		"list the records abandoned now (ListAbandoned) and watch again from %d", e.cursor, e.pruned, e.pruned)
}

// WatchAbandoned streams the feed from the cursor on, then every new event
// as this node applies it, until the client leaves or the node shuts down.
func (s *Server) WatchAbandoned(req *idempb.WatchAbandonedRequest, stream grpc.ServerStreamingServer[idempb.WatchAbandonedResponse]) error {
	ctx := stream.Context()
	scope, err := s.scopeOf(ctx, req.GetTenant())
	if err != nil {
		return toStatus(err, s.log)
	}
	if err := s.checkFeedCursor(ctx, scope, req.GetAfterSeq()); err != nil {
		return err
	}
	m := s.backend.Machine()
	cursor := req.GetAfterSeq()
	if cursor == 0 {
		cursor = m.Meta().Feed.PrunedThrough // from the oldest event kept
	}
	cursor = s.replayFrom(cursor)
	heartbeat := time.NewTicker(feedHeartbeat)
	defer heartbeat.Stop()
	announce, started := true, false // the first message says where the stream starts
	for {
		changed := m.FeedChanged()
		msg, next, err := readFeed(m, scope, cursor)
		var pruned *errPruned
		if errors.As(err, &pruned) && req.GetAfterSeq() == 0 && !started {
			cursor = pruned.pruned // "from the oldest kept", which moved on meanwhile
			continue
		}
		if err != nil {
			return toStatus(err, s.log)
		}
		if len(msg.Events) > 0 || next != cursor || announce {
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
		announce, started = false, true
		more := next-cursor >= feedBatch
		cursor = next
		if more {
			continue
		}
		select {
		case <-changed:
		case <-heartbeat.C:
			announce = true
		case <-s.closing:
			return toStatus(cluster.ErrShutdown, s.log)
		case <-ctx.Done():
			return nil
		}
	}
}

// readFeed reads up to feedBatch events after cursor and returns those in
// scope and the new cursor. Events are numbered without gaps, so the first
// one read must be cursor+1: anything else means events after the cursor
// were pruned before the client saw them.
func readFeed(m *fsm.Machine, scope feedScope, cursor uint64) (*idempb.WatchAbandonedResponse, uint64, error) {
	evs, err := m.Events(cursor, feedBatch)
	if err != nil {
		return nil, 0, err
	}
	if len(evs) > 0 && evs[0].Seq != cursor+1 {
		return nil, 0, &errPruned{cursor: cursor, pruned: evs[0].Seq - 1}
	}
	if pruned := m.Meta().Feed.PrunedThrough; len(evs) == 0 && pruned > cursor {
		return nil, 0, &errPruned{cursor: cursor, pruned: pruned}
	}
	msg := &idempb.WatchAbandonedResponse{}
	next := cursor
	for _, ev := range evs {
		if scope.has(ev) {
			msg.Events = append(msg.Events, eventOf(ev))
		}
		next = ev.Seq
	}
	msg.CaughtUpSeq = next
	return msg, next, nil
}

// ListAbandoned pages through the records abandoned now.
func (s *Server) ListAbandoned(ctx context.Context, req *idempb.ListAbandonedRequest) (*idempb.ListAbandonedResponse, error) {
	scope, err := s.scopeOf(ctx, req.GetTenant())
	if err != nil {
		return nil, toStatus(err, s.log)
	}
	size := int(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		return nil, toStatus(invalid("page_size", fmt.Sprint(maxPageSize), "%d is too many", size), s.log)
	}
	if after := req.GetAfterSeq(); after > s.backend.Machine().Meta().Feed.Seq {
		// Ahead of this node: the leader answers, after a read barrier.
		return routed(ctx, s, func(ctx context.Context) (*idempb.ListAbandonedResponse, error) {
			if err := s.feedCursorWithin(ctx, after); err != nil {
				return nil, err
			}
			return s.listAbandoned(scope, after, size)
		}, viaUnary(s, func(ctx context.Context, c *grpc.ClientConn) (*idempb.ListAbandonedResponse, error) {
			return idempb.NewIdempotencyClient(c).ListAbandoned(ctx,
				&idempb.ListAbandonedRequest{Tenant: scope.arg(), AfterSeq: after, PageSize: uint32(size)})
		}))
	}
	out, err := s.listAbandoned(scope, req.GetAfterSeq(), size)
	return out, toStatus(err, s.log)
}

// listAbandoned reads up to size records abandoned now after the cursor.
func (s *Server) listAbandoned(scope feedScope, after uint64, size int) (*idempb.ListAbandonedResponse, error) {
	m := s.backend.Machine()
	out := &idempb.ListAbandonedResponse{}
	for scanned := 0; scanned < listScan && len(out.Records) < size; {
		page, next, err := m.AbandonedNow(scope.tenant, scope.all, after, min(size-len(out.Records), listScan-scanned))
		if err != nil {
			return nil, err
		}
		for _, ev := range page {
			out.Records = append(out.Records, eventOf(ev))
		}
		if next == 0 {
			return out, nil
		}
		scanned += int(next - after)
		after = next
	}
	out.NextAfterSeq = after
	return out, nil
}

func eventOf(ev *fsm.Event) *idempb.AbandonedEvent {
	return &idempb.AbandonedEvent{
		Seq:            ev.Seq,
		Kind:           idempb.AbandonedEvent_Kind(ev.Kind),
		Resolution:     idempb.AbandonedEvent_Resolution(ev.Resolution),
		ResolvesSeq:    ev.Resolves,
		Id:             &idempb.RecordId{Tenant: ev.Tenant, Scope: ev.Scope, Key: ev.Key},
		Token:          ev.Token,
		Attempt:        ev.Attempt,
		RecoveryPoint:  ev.Point,
		LeaseExpiresAt: timestamp(ev.LeaseExpiresAt),
		At:             timestamp(ev.At),
		KeepUntil:      timestamp(ev.KeepUntil),
	}
}
