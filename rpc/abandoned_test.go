package rpc

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/internal/testclock"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// abandon claims key for tenant's caller with a short lease and lets it
// lapse: it moves clk, the node's, a second on, past the lease and to the
// expiry ticker's next tick, and returns once the feed has reported it.
func abandon(t *testing.T, clk *testclock.Clock, c *caller, tenant, key string) {
	t.Helper()
	ctx := testCtx(t)
	won, err := c.api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID(tenant, key), Owner: "o", Fingerprint: []byte{1},
		Lease: dur(100 * time.Millisecond)})
	if err != nil || won.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim %s/%s: %v %v", tenant, key, won, err)
	}
	clk.Advance(time.Second)
	testutil.Eventually(t, 10*time.Second, "the abandonment marked", func() bool {
		page, err := c.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{Tenant: tenant})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, ev := range page.GetRecords() {
			if ev.GetId().GetKey() == key {
				return true
			}
		}
		return false
	})
}

// watchFirst opens a watch and returns its first message with events.
func watchFirst(ctx context.Context, c *caller, req *idempb.WatchAbandonedRequest) (*idempb.WatchAbandonedResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := c.api.WatchAbandoned(ctx, req)
	if err != nil {
		return nil, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil || len(msg.GetEvents()) > 0 {
			return msg, err
		}
	}
}

func keysOf(evs []*idempb.AbandonedEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.GetId().GetTenant()+"/"+ev.GetId().GetKey())
	}
	return out
}

// TestAbandonedFeedIsTenantScoped: a tenant watches and lists its own
// abandoned claims only; another tenant's, or every tenant's, needs an
// admin identity, which sees every tenant's events in one sequence.
func TestAbandonedFeedIsTenantScoped(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	limits.MinLease = 100 * time.Millisecond
	clk := testclock.New(time.Now())
	s := mustAuthServer(t, mustNodeOn(t, clk), limits)
	ctx := testCtx(t)
	acme, globex, ops := s.withToken(t, tokenAcme), s.withToken(t, tokenGlobex), s.withToken(t, tokenOps)
	abandon(t, clk, globex, "globex", "g1")
	abandon(t, clk, acme, "acme", "a1")

	msg, err := watchFirst(ctx, acme, &idempb.WatchAbandonedRequest{})
	if err != nil || fmt.Sprint(keysOf(msg.GetEvents())) != "[acme/a1]" || msg.GetCaughtUpSeq() != 2 {
		t.Fatalf("acme's own feed: %v (caught up %d), %v", keysOf(msg.GetEvents()), msg.GetCaughtUpSeq(), err)
	}
	ev := msg.GetEvents()[0]
	if ev.GetSeq() != 2 || ev.GetKind() != idempb.AbandonedEvent_KIND_ABANDONED || ev.GetToken() == 0 || ev.GetAttempt() != 1 ||
		ev.GetLeaseExpiresAt() == nil || ev.GetAt() == nil || ev.GetKeepUntil().AsTime().Before(ev.GetAt().AsTime()) {
		t.Fatalf("event %v", ev)
	}
	msg, err = watchFirst(ctx, ops, &idempb.WatchAbandonedRequest{Tenant: "*"})
	if err != nil || fmt.Sprint(keysOf(msg.GetEvents())) != "[globex/g1 acme/a1]" {
		t.Fatalf("the admin's feed of every tenant: %v, %v", keysOf(msg.GetEvents()), err)
	}
	list, err := ops.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{Tenant: "*", PageSize: 1})
	if err != nil || fmt.Sprint(keysOf(list.GetRecords())) != "[globex/g1]" || list.GetNextAfterSeq() != 1 {
		t.Fatalf("first page of every tenant: %v next %d, %v", keysOf(list.GetRecords()), list.GetNextAfterSeq(), err)
	}

	_, err = watchFirst(ctx, acme, &idempb.WatchAbandonedRequest{Tenant: "globex"})
	checkDenied(t, "acme watches globex", err, codes.PermissionDenied, idempb.ReasonTenantMismatch)
	_, err = watchFirst(ctx, acme, &idempb.WatchAbandonedRequest{Tenant: "*"})
	checkDenied(t, "acme watches every tenant", err, codes.PermissionDenied, idempb.ReasonAdminRequired)
	_, err = acme.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{Tenant: "globex"})
	checkDenied(t, "acme lists globex", err, codes.PermissionDenied, idempb.ReasonTenantMismatch)
	_, err = acme.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{Tenant: "bad tenant"})
	checkInvalid(t, err, "tenant")
	_, err = acme.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{PageSize: 1001})
	checkInvalid(t, err, "page_size")
}

// TestWatchRefusesAPrunedCursor: a cursor whose next events were pruned is
// refused with OutOfRange FEED_PRUNED, never answered with a gap; after 0
// starts at the oldest event kept.
func TestWatchRefusesAPrunedCursor(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	limits.MinLease, limits.MinTTL = 100*time.Millisecond, 100*time.Millisecond
	clk := testclock.New(time.Now())
	node := mustNodeOn(t, clk)
	_, conn := serveAPI(t, node, limits)
	c := &caller{conn: conn, api: idempb.NewIdempotencyClient(conn)}
	ctx := testCtx(t)
	won, err := c.api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("", "short"), Owner: "o", Fingerprint: []byte{1},
		Lease: dur(100 * time.Millisecond), Ttl: dur(200 * time.Millisecond)})
	if err != nil || won.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim: %v %v", won, err)
	}
	// Abandoned, then expired, then both events pruned after the TTL: the
	// clock moves on while the test waits, five times as fast as the real
	// one, so each expiry tick is taken before the next.
	testutil.Eventually(t, 15*time.Second, "the feed pruned", func() bool {
		clk.Advance(10 * time.Millisecond)
		st, err := c.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{})
		return err == nil && len(st.GetRecords()) == 0 && node.Machine().Meta().Feed.PrunedThrough >= 2
	})
	_, err = watchFirst(ctx, c, &idempb.WatchAbandonedRequest{AfterSeq: 1})
	checkDenied(t, "a pruned cursor", err, codes.OutOfRange, idempb.ReasonFeedPruned)
	abandon(t, clk, c, "", "later")
	msg, err := watchFirst(ctx, c, &idempb.WatchAbandonedRequest{})
	if err != nil || fmt.Sprint(keysOf(msg.GetEvents())) != "[/later]" || msg.GetEvents()[0].GetSeq() != 3 {
		t.Fatalf("from the oldest kept: %v, %v", msg, err)
	}
}

// checkCursorAhead requires the FEED_CURSOR_AHEAD refusal carrying last,
// the feed's last sequence, in its metadata.
func checkCursorAhead(t *testing.T, what string, err error, last uint64) {
	t.Helper()
	checkDenied(t, what, err, codes.OutOfRange, idempb.ReasonFeedCursorAhead)
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetMetadata()["last_seq"] != fmt.Sprint(last) {
			t.Fatalf("%s: metadata %v, want last_seq %d", what, info.GetMetadata(), last)
		}
	}
}

// TestFeedRefusesACursorAheadOfTheCluster: a cursor past the feed's last
// event (a reconciler's cursor kept from a cluster since restored from an
// older backup) is refused with OutOfRange FEED_CURSOR_AHEAD and the feed's
// last sequence, by WatchAbandoned and ListAbandoned alike, instead of
// being reported caught up while every new event goes unseen. The last
// sequence itself is a cursor like any other.
func TestFeedRefusesACursorAheadOfTheCluster(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits()
	limits.MinLease = 100 * time.Millisecond
	clk := testclock.New(time.Now())
	node := mustNodeOn(t, clk)
	_, conn := serveAPI(t, node, limits)
	c := &caller{conn: conn, api: idempb.NewIdempotencyClient(conn)}
	ctx := testCtx(t)
	abandon(t, clk, c, "", "k1")
	last := node.Machine().Meta().Feed.Seq
	if last != 1 {
		t.Fatalf("the feed ends at %d, want 1", last)
	}
	for _, cursor := range []uint64{math.MaxUint64, last + 1} {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		stream, err := c.api.WatchAbandoned(wctx, &idempb.WatchAbandonedRequest{AfterSeq: cursor})
		if err == nil {
			var msg *idempb.WatchAbandonedResponse
			msg, err = stream.Recv()
			if err == nil {
				err = fmt.Errorf("the stream answered caught up to %d", msg.GetCaughtUpSeq())
			}
		}
		cancel()
		checkCursorAhead(t, fmt.Sprintf("watch after %d", cursor), err, last)
		_, err = c.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{AfterSeq: cursor})
		checkCursorAhead(t, fmt.Sprintf("list after %d", cursor), err, last)
	}
	if _, err := c.api.ListAbandoned(ctx, &idempb.ListAbandonedRequest{AfterSeq: last}); err != nil {
		t.Fatalf("list after the last event: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stream, err := c.api.WatchAbandoned(wctx, &idempb.WatchAbandonedRequest{AfterSeq: last})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.Recv(); err != nil || msg.GetCaughtUpSeq() != last {
		t.Fatalf("watch after the last event: %v, %v", msg, err)
	}
}
