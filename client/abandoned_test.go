package client_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// feedLog collects what a watcher was handed.
type feedLog struct {
	mu     sync.Mutex
	events []client.AbandonedEvent
}

func (f *feedLog) add(up client.FeedUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, up.Events...)
	return nil
}

// count returns how many events of kind (and resolution) about key it holds.
func (f *feedLog) count(key, kind, resolution string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ev := range f.events {
		if ev.ID.Key == key && ev.Kind == kind && ev.Resolution == resolution {
			n++
		}
	}
	return n
}

func (f *feedLog) find(key, kind string) (client.AbandonedEvent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range f.events {
		if ev.ID.Key == key && ev.Kind == kind {
			return ev, true
		}
	}
	return client.AbandonedEvent{}, false
}

// increasing reports the first event that does not follow the one before.
func (f *feedLog) increasing() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 1; i < len(f.events); i++ {
		if f.events[i].Seq <= f.events[i-1].Seq {
			return fmt.Errorf("event %d follows %d", f.events[i].Seq, f.events[i-1].Seq)
		}
	}
	return nil
}

// TestAbandonedFeedAcrossFailover: a holder charges a card, records the
// checkpoint and dies; its lease lapses and a watcher is told once. The
// leader crashes under the watcher, which resumes on another node from its
// cursor: a second abandonment after the crash arrives, the first is not
// repeated. The next claim resumes from the checkpoint and completes, and
// the watcher is told the first is resolved: the card was charged once.
func TestAbandonedFeedAcrossFailover(t *testing.T) {
	skipInShort(t, "crashes the leader of a 3-node cluster under a watcher")
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	var streams atomic.Int64 // WatchAbandoned streams opened
	cl := newClient(t, c, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				if method == idempb.Idempotency_WatchAbandoned_FullMethodName {
					streams.Add(1)
				}
				return streamer(ctx, desc, cc, method, opts...)
			}))
	})
	ctx := testCtx(t)
	var feed feedLog
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() { watched <- cl.WatchAbandoned(watchCtx, "acme", 0, feed.add) }()

	var charges, receipts atomic.Int64
	ride := twoStepRide(&charges, &receipts)
	// dies claims id, charges, records the checkpoint and stops there.
	dies := func(id client.ID) uint64 {
		won, err := cl.Claim(ctx, id, []byte("ride"), client.WithLease(time.Second))
		if err != nil || won.Outcome != client.OutcomeWon {
			t.Fatalf("claim %s: %+v %v", id.Key, won, err)
		}
		charges.Add(1)
		if out, err := cl.Checkpoint(ctx, id, won.Token, "charged", []byte("ch_1")); err != nil || out != client.OutcomeOK {
			t.Fatalf("checkpoint: %v %v", out, err)
		}
		return won.Token
	}

	first, second := newID(), newID()
	token := dies(first)
	testutil.Eventually(t, 20*time.Second, "the abandonment reported", func() bool { return feed.count(first.Key, "abandoned", "") > 0 })
	ev, _ := feed.find(first.Key, "abandoned")
	if ev.Token != token || ev.Attempt != 1 || ev.RecoveryPoint != "charged" {
		t.Fatalf("abandoned event %+v, want token %d, attempt 1, point charged", ev, token)
	}
	now, _, err := cl.ListAbandoned(ctx, "acme", 0, 0)
	if err != nil || len(now) != 1 || now[0].ID != first || now[0].Seq != ev.Seq {
		t.Fatalf("abandoned now: %+v %v", now, err)
	}

	leader := c.WaitLeader(30 * time.Second)
	c.Crash(leader)
	t.Logf("crashed the leader %s after event %d", leader.ID, ev.Seq)
	c.WaitLeader(30 * time.Second)
	dies(second)
	testutil.Eventually(t, 30*time.Second, "the abandonment after the crash reported", func() bool {
		return feed.count(second.Key, "abandoned", "") > 0
	})

	charges.Store(1) // the first holder's charge; the second's is its own key's
	res, err := cl.Do(ctx, first, []byte("ride"), ride, client.WithWait(5*time.Second))
	if err != nil || !res.Executed || string(res.Response.Body) != "ch_1" {
		t.Fatalf("do after the abandonment: %+v %v", res, err)
	}
	if charges.Load() != 1 || receipts.Load() != 1 {
		t.Fatalf("%d charges and %d receipts, want one of each", charges.Load(), receipts.Load())
	}
	testutil.Eventually(t, 20*time.Second, "the resolution reported", func() bool {
		return feed.count(first.Key, "resolved", "taken_over") > 0
	})
	// A last abandonment: the feed arrives in order, so once it is here any
	// repeat of an earlier event would have come before it.
	last := newID()
	dies(last)
	testutil.Eventually(t, 20*time.Second, "the last abandonment reported", func() bool {
		return feed.count(last.Key, "abandoned", "") > 0
	})
	stopWatch()
	if err := <-watched; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
	for _, want := range []struct{ key, kind, resolution string }{
		{first.Key, "abandoned", ""}, {second.Key, "abandoned", ""}, {first.Key, "resolved", "taken_over"},
	} {
		if n := feed.count(want.key, want.kind, want.resolution); n != 1 {
			t.Errorf("%s %s %s delivered %d times, want once", want.key, want.kind, want.resolution, n)
		}
	}
	if err := feed.increasing(); err != nil {
		t.Error(err)
	}
	if streams.Load() < 2 {
		t.Errorf("the watcher opened %d streams: the crash did not cut it", streams.Load())
	}
	now, _, err = cl.ListAbandoned(ctx, "acme", 0, 0)
	if err != nil || len(now) != 2 || now[0].ID != second || now[1].ID != last {
		t.Fatalf("abandoned now after the takeover: %+v %v", now, err)
	}
}

// TestWatchAbandonedCursorAhead: a cursor past the cluster's last event
// (kept from before the cluster was restored from an older backup) ends
// the watch at once with a *client.FeedCursorAheadError carrying the last
// event, instead of a watcher that is told it is caught up, or retries,
// forever; ListAbandoned refuses it the same way.
func TestWatchAbandonedCursorAhead(t *testing.T) {
	t.Parallel()
	var streams atomic.Int64
	cl := newClient(t, shared, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				streams.Add(1)
				return streamer(ctx, desc, cc, method, opts...)
			}))
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	before := shared.WaitLeader(30 * time.Second).Node().Machine().Meta().Feed.Seq
	err := cl.WatchAbandoned(ctx, "", math.MaxUint64, func(up client.FeedUpdate) error {
		return fmt.Errorf("handed %+v", up)
	})
	var ahead *client.FeedCursorAheadError
	if !errors.As(err, &ahead) || !errors.Is(err, client.ErrFeedCursorAhead) || ctx.Err() != nil {
		t.Fatalf("watch after 2^64-1: %v, want a FeedCursorAheadError", err)
	}
	after := shared.WaitLeader(30 * time.Second).Node().Machine().Meta().Feed.Seq
	if ahead.Cursor != math.MaxUint64 || ahead.LastSeq < before || ahead.LastSeq > after {
		t.Fatalf("cursor %d, last seq %d; want 2^64-1 and the feed's end (%d..%d)", ahead.Cursor, ahead.LastSeq, before, after)
	}
	if n := streams.Load(); n != 1 {
		t.Fatalf("the watcher opened %d streams, want 1: the refusal is final", n)
	}
	_, _, err = cl.ListAbandoned(ctx, "", math.MaxUint64, 0)
	if !errors.As(err, &ahead) || ahead.LastSeq < before {
		t.Fatalf("list after 2^64-1: %v, want a FeedCursorAheadError", err)
	}
}
