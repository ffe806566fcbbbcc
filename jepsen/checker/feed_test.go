package checker

import (
	"testing"

	"github.com/idemnode/idemnode/jepsen/history"
)

// feedEv is an event watcher p was handed.
func feedEv(p int, seq uint64, kind, key string, token uint64) history.Event {
	e := history.Event{Type: history.OK, F: history.FFeed, Process: p, Node: nodeA, Seq: seq, FeedKind: kind, Key: key,
		RecToken: token, Attempt: 1, LeaseExpiresAt: at(2), FSMTime: at(3)}
	return e
}

func resolvedEv(p int, seq uint64, key string, resolves uint64) history.Event {
	e := feedEv(p, seq, "resolved", key, 9)
	e.Resolution, e.Resolves = "taken_over", resolves
	return e
}

// validFeed: two watchers, the second resuming after a FEED_PRUNED refusal.
func validFeed() []history.Event {
	return []history.Event{
		feedEv(100, 1, "abandoned", "k1", 5),
		feedEv(100, 2, "abandoned", "k2", 6),
		resolvedEv(100, 3, "k1", 1),
		feedEv(101, 2, "abandoned", "k2", 6),
		{Type: history.OK, F: history.FFeedPruned, Process: 101, Seq: 2},
		resolvedEv(101, 5, "k2", 2),
	}
}

func TestFeedCheckerAcceptsAValidFeed(t *testing.T) {
	if as := checkFeed(validFeed(), newParsed(nil)); len(as) != 0 {
		t.Fatalf("anomalies in a valid feed: %v", as)
	}
}

// TestFeedCheckerCatchesBrokenFeeds: each defect a faulty feed could show
// is reported under its kind.
func TestFeedCheckerCatchesBrokenFeeds(t *testing.T) {
	earlyLease := feedEv(100, 3, "abandoned", "k3", 7)
	earlyLease.FSMTime = at(1) // before the lease it reports ended
	shortLease := feedEv(100, 3, "abandoned", "k3", 7)
	shortLease.LeaseExpiresAt = at(1)
	grantedLater := []history.Event{
		{Type: history.Invoke, Process: 1, Op: 1, F: history.FClaim, Key: "k3", Owner: "o", LeaseNs: tLease},
		{Type: history.OK, Process: 1, Op: 1, F: history.FClaim, Key: "k3", Owner: "o", LeaseNs: tLease,
			Outcome: "won", RecToken: 7, Attempt: 1, LeaseExpiresAt: at(2), ExpiresAt: at(10)},
	}
	for name, c := range map[string]struct {
		events []history.Event
		kind   string
	}{
		"repeated after a resume": {[]history.Event{feedEv(100, 1, "abandoned", "k1", 5), feedEv(100, 1, "abandoned", "k1", 5)}, KindFeedDuplicate},
		"older after newer":       {[]history.Event{feedEv(100, 2, "abandoned", "k2", 6), feedEv(100, 1, "abandoned", "k1", 5)}, KindFeedDuplicate},
		"skipped":                 {[]history.Event{feedEv(100, 1, "abandoned", "k1", 5), feedEv(100, 3, "abandoned", "k3", 7)}, KindFeedGap},
		"numbered differently":    {[]history.Event{feedEv(100, 1, "abandoned", "k1", 5), feedEv(101, 1, "abandoned", "k2", 6)}, KindFeedDivergence},
		"resolved twice": {[]history.Event{feedEv(100, 1, "abandoned", "k1", 5), resolvedEv(100, 2, "k1", 1),
			resolvedEv(100, 3, "k1", 1)}, KindFeedResolution},
		"resolves another key":         {[]history.Event{feedEv(100, 1, "abandoned", "k1", 5), resolvedEv(100, 2, "k2", 1)}, KindFeedResolution},
		"resolves a later event":       {[]history.Event{resolvedEv(100, 2, "k1", 3)}, KindFeedResolution},
		"before its lease ended":       {[]history.Event{earlyLease}, KindFeedEarlyAbandon},
		"a lease shorter than granted": {append(grantedLater, shortLease), KindFeedEarlyAbandon},
	} {
		as := checkFeed(c.events, newParsed(c.events))
		if len(as) == 0 || as[0].Kind != c.kind {
			t.Errorf("%s: anomalies %v, want %s", name, as, c.kind)
		}
	}
}

// TestCheckRunsTheFeedChecker: Check reports feed anomalies, and the feed's
// lines are not client operations.
func TestCheckRunsTheFeedChecker(t *testing.T) {
	rep := Check(append(validFeed(), feedEv(100, 2, "abandoned", "k2", 6)), nil, Options{})
	if rep.OK() || rep.Anomalies[0].Kind != KindFeedDuplicate || rep.Counts.Ops != 0 {
		t.Fatalf("report %+v", rep)
	}
}
