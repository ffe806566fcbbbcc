package checker

import (
	"fmt"
	"sort"

	"github.com/idemnode/idemnode/jepsen/history"
)

// Anomaly kinds of the abandoned feed.
const (
	// KindFeedDuplicate: a watcher was handed an event again, or an older
	// one after a newer, from a stream resumed with its cursor.
	KindFeedDuplicate = "feed-duplicate"
	// KindFeedGap: a watcher of every tenant skipped an event number that
	// no FEED_PRUNED refusal accounts for.
	KindFeedGap = "feed-gap"
	// KindFeedDivergence: two watchers were handed different events under
	// one number (two nodes numbered the feed differently).
	KindFeedDivergence = "feed-divergence"
	// KindFeedResolution: a resolved event settles no abandoned event of its
	// key before it, or an abandoned event is settled twice.
	KindFeedResolution = "feed-resolution"
	// KindFeedEarlyAbandon: an abandoned event is dated before the lease it
	// reports ended, or reports a lease that ended before the one its
	// claim was granted.
	KindFeedEarlyAbandon = "feed-early-abandon"
)

// checkFeed checks what the watchers of the abandoned feed were handed: in
// each watcher's order, numbers increase by exactly one (after a
// FEED_PRUNED refusal, any number may come next); across watchers, one
// number is one event; resolutions settle an earlier abandoned event of the
// same key once; an abandonment comes after the lease it reports, which is
// no earlier than its grant's.
func checkFeed(events []history.Event, h *parsed) []Anomaly {
	byWatcher := map[int][]history.Event{}
	var watchers []int
	for _, e := range events {
		if e.F != history.FFeed && e.F != history.FFeedPruned {
			continue
		}
		if byWatcher[e.Process] == nil {
			watchers = append(watchers, e.Process)
		}
		byWatcher[e.Process] = append(byWatcher[e.Process], e)
	}
	sort.Ints(watchers)
	var out []Anomaly
	seen := map[uint64]history.Event{}
	for _, p := range watchers {
		out = append(out, checkWatcherOrder(byWatcher[p])...)
		for _, e := range byWatcher[p] {
			if e.F != history.FFeed {
				continue
			}
			if first, ok := seen[e.Seq]; !ok {
				seen[e.Seq] = e
			} else if feedSignature(first) != feedSignature(e) {
				out = append(out, Anomaly{Kind: KindFeedDivergence, Key: e.Key, Events: []history.Event{first, e},
					Explanation: fmt.Sprintf("event %d is %s on %s and %s on %s", e.Seq, feedSignature(first), first.Node, feedSignature(e), e.Node)})
			}
		}
	}
	out = append(out, checkResolutions(seen)...)
	out = append(out, checkAbandonTimes(seen, h)...)
	return out
}

// checkWatcherOrder checks one watcher's events in the order it got them.
func checkWatcherOrder(evs []history.Event) []Anomaly {
	var out []Anomaly
	var prev *history.Event
	for i := range evs {
		e := &evs[i]
		if e.F == history.FFeedPruned {
			prev = nil
			continue
		}
		switch {
		case prev == nil:
		case e.Seq <= prev.Seq:
			out = append(out, Anomaly{Kind: KindFeedDuplicate, Key: e.Key, Events: []history.Event{*prev, *e},
				Explanation: fmt.Sprintf("watcher %d was handed event %d after event %d", e.Process, e.Seq, prev.Seq)})
		case e.Seq != prev.Seq+1:
			out = append(out, Anomaly{Kind: KindFeedGap, Key: e.Key, Events: []history.Event{*prev, *e},
				Explanation: fmt.Sprintf("watcher %d was handed event %d after event %d: %d events skipped", e.Process, e.Seq, prev.Seq, e.Seq-prev.Seq-1)})
		}
		prev = e
	}
	return out
}

func feedSignature(e history.Event) string {
	return fmt.Sprintf("%s %s key=%s token=%d attempt=%d point=%q resolves=%d lease=%d at=%d",
		e.FeedKind, e.Resolution, e.Key, e.RecToken, e.Attempt, e.RecPoint, e.Resolves, e.LeaseExpiresAt, e.FSMTime)
}

// checkResolutions: every resolved event settles an abandoned event of its
// key numbered before it, and no abandoned event is settled twice. An
// abandoned event no watcher saw (before a watcher's first event, or
// pruned) cannot be checked and is not flagged.
func checkResolutions(seen map[uint64]history.Event) []Anomaly {
	seqs := make([]uint64, 0, len(seen))
	for s := range seen {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	settled := map[uint64]history.Event{}
	var out []Anomaly
	for _, s := range seqs {
		e := seen[s]
		if e.FeedKind != "resolved" {
			continue
		}
		ab, known := seen[e.Resolves]
		switch {
		case e.Resolves >= e.Seq, known && (ab.FeedKind != "abandoned" || ab.Key != e.Key):
			out = append(out, Anomaly{Kind: KindFeedResolution, Key: e.Key, Events: []history.Event{e},
				Explanation: fmt.Sprintf("event %d resolves event %d, not an earlier abandonment of its key", e.Seq, e.Resolves)})
		case settled[e.Resolves].Seq != 0:
			out = append(out, Anomaly{Kind: KindFeedResolution, Key: e.Key, Events: []history.Event{settled[e.Resolves], e},
				Explanation: fmt.Sprintf("event %d resolves event %d, which event %d resolved", e.Seq, e.Resolves, settled[e.Resolves].Seq)})
		default:
			settled[e.Resolves] = e
		}
	}
	return out
}

// checkAbandonTimes: the state machine marks a record abandoned only once
// its lease ended (in FSM time), and a lease only grows from its grant.
func checkAbandonTimes(seen map[uint64]history.Event, h *parsed) []Anomaly {
	var out []Anomaly
	for _, e := range seen {
		if e.FeedKind != "abandoned" {
			continue
		}
		var g *grant
		if k := h.byKey[e.Key]; k != nil {
			g = k.byToken[e.RecToken]
		}
		switch {
		case e.FSMTime < e.LeaseExpiresAt:
			out = append(out, Anomaly{Kind: KindFeedEarlyAbandon, Key: e.Key, Events: []history.Event{e},
				Explanation: fmt.Sprintf("event %d marks token %d abandoned at %d, before its lease ended at %d", e.Seq, e.RecToken, e.FSMTime, e.LeaseExpiresAt)})
		case g != nil && e.LeaseExpiresAt < g.lea:
			out = append(out, Anomaly{Kind: KindFeedEarlyAbandon, Key: e.Key, Events: []history.Event{e, g.op.ev},
				Explanation: fmt.Sprintf("event %d reports token %d's lease ending at %d, before the lease it was granted (%d)", e.Seq, e.RecToken, e.LeaseExpiresAt, g.lea)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Events[0].Seq < out[j].Events[0].Seq })
	return out
}
