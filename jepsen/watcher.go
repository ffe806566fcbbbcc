package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/jepsen/history"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// watcher follows the feed of abandoned claims of every tenant the way a
// reconciler would: from one node at a time, keeping its cursor, and moving
// to another node whenever its stream ends, goes quiet, or has lived a few
// seconds. It records every
// event the server hands it, duplicates included (a reconciler would drop
// those by the cursor; the checker must see them), so the checker can tell
// whether the feed repeated, skipped or reordered an event across faults.
type watcher struct {
	process int
	nodes   []*node
	hist    *history.Writer
	clock   func() int64
	rng     *rand.Rand
}

func (w *watcher) run(ctx context.Context) {
	var cursor uint64
	for i := w.rng.IntN(len(w.nodes)); ctx.Err() == nil; i++ {
		n := w.nodes[i%len(w.nodes)]
		err := w.follow(ctx, n, &cursor)
		if status.Code(err) == codes.OutOfRange {
			w.add(history.Event{F: history.FFeedPruned, Node: n.id, Seq: cursor, Error: err.Error()})
			cursor = 0 // from the oldest event kept
		}
		sleep(ctx, time.Duration(20+w.rng.IntN(80))*time.Millisecond)
	}
}

// follow streams from n until the stream fails, ctx ends, nothing arrives
// for a few seconds (a node cut off by a partition stalls rather than
// fails), or its 1-6 s of life are over.
func (w *watcher) follow(ctx context.Context, n *node, cursor *uint64) error {
	conn, err := n.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := idempb.NewIdempotencyClient(conn).WatchAbandoned(ctx,
		&idempb.WatchAbandonedRequest{Tenant: "*", AfterSeq: *cursor})
	if err != nil {
		return err
	}
	quiet := time.Duration(2+w.rng.IntN(6)) * time.Second
	idle := time.AfterFunc(quiet, cancel)
	defer idle.Stop()
	// A stream lives a few seconds at most: the watcher hops between nodes
	// even when no fault cuts it, so resuming from the cursor is exercised
	// all the time.
	life := time.AfterFunc(time.Duration(1000+w.rng.IntN(5000))*time.Millisecond, cancel)
	defer life.Stop()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return err
		}
		idle.Reset(quiet)
		for _, ev := range msg.GetEvents() {
			w.add(feedEvent(n.id, ev))
		}
		*cursor = max(*cursor, msg.GetCaughtUpSeq())
	}
}

func (w *watcher) add(e history.Event) {
	e.Type, e.Process, e.Time = history.OK, w.process, w.clock()
	_ = w.hist.Add(e)
}

func feedEvent(node string, ev *idempb.AbandonedEvent) history.Event {
	e := history.Event{F: history.FFeed, Node: node, Key: ev.GetId().GetKey(), Seq: ev.GetSeq(),
		FeedKind: strings.ToLower(strings.TrimPrefix(ev.GetKind().String(), "KIND_")),
		Resolves: ev.GetResolvesSeq(),
		RecToken: ev.GetToken(), Attempt: ev.GetAttempt(), RecPoint: ev.GetRecoveryPoint(),
		LeaseExpiresAt: nanos(ev.GetLeaseExpiresAt()), FSMTime: nanos(ev.GetAt())}
	if r := ev.GetResolution(); r != idempb.AbandonedEvent_RESOLUTION_UNSPECIFIED {
		e.Resolution = strings.ToLower(strings.TrimPrefix(r.String(), "RESOLUTION_"))
	}
	return e
}
