package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"testing"
)

// events returns every event m keeps, in order.
func events(t tb, m *Machine) []*Event {
	t.Helper()
	evs, err := m.Events(0, 1<<20)
	if err != nil {
		t.Fatalf("read the feed: %v", err)
	}
	return evs
}

// wantEvents checks the events numbered above after: their kind,
// resolution and record key, in order.
func wantEvents(t *testing.T, m *Machine, after uint64, want ...string) []*Event {
	t.Helper()
	evs, err := m.Events(after, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, eventString(ev))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events after %d:\n got %v\nwant %v", after, got, want)
	}
	return evs
}

func eventString(ev *Event) string {
	s := fmt.Sprintf("%d %s %s", ev.Seq, ev.Kind, ev.Key)
	if ev.Kind == EventResolved {
		s += fmt.Sprintf(" %s of %d", ev.Resolution, ev.Resolves)
	}
	return s
}

const (
	lease10 = 10 * sec
	ttl100  = 100 * sec
)

func TestAbandonedRecordIsMarkedAtItsLeaseEnd(t *testing.T) {
	h := newHarness(t)
	res := h.apply(watched("a", "o1", lease10, ttl100, at(0)))
	h.want(res, OutcomeWon)
	token := res.Record.Token
	h.want(h.apply(checkpoint("a", token, "charged", "ch_1", at(1))), OutcomeOK)
	h.applyAll(claim("plain", "o1", at(1))) // not watched: never reported

	h.apply(expire(10, at(9)))
	wantEvents(t, h.m, 0) // the lease has not ended yet

	res = h.apply(expire(10, at(10)))
	if res.Abandoned != 1 || res.Expired != 0 {
		t.Fatalf("expire at the lease end: abandoned %d, expired %d; want 1, 0", res.Abandoned, res.Expired)
	}
	ev := wantEvents(t, h.m, 0, "1 abandoned a")[0]
	if ev.Token != token || ev.Attempt != 1 || ev.Point != "charged" || ev.LeaseExpiresAt != at(10) || ev.At != at(10) {
		t.Fatalf("event %+v", ev)
	}
	if ev.KeepUntil != at(100)+ttl100-at(0) && ev.KeepUntil < at(100) {
		t.Fatalf("event kept until %d, before the record's end %d", ev.KeepUntil, at(100))
	}
	r, _ := h.stored("a")
	if r.Abandoned != 1 || h.m.Meta().Feed.Abandoned != 1 || h.m.Meta().Feed.Total != 1 {
		t.Fatalf("record marked %d, feed %+v", r.Abandoned, h.m.Meta().Feed)
	}
	h.apply(expire(10, at(50)))
	wantEvents(t, h.m, 1) // marked once
}

// TestResolvedEvents: whatever ends an abandoned record's mark adds one
// resolved event that names the abandoned one; marking fences nobody.
func TestResolvedEvents(t *testing.T) {
	cases := map[string]struct {
		then func(h *harness, token uint64)
		want string
	}{
		"completed by the holder after all": {
			then: func(h *harness, token uint64) {
				h.want(h.apply(complete("a", token, resp(200, "ok"), at(20))), OutcomeOK)
			},
			want: "completed",
		},
		"released": {
			then: func(h *harness, token uint64) { h.want(h.apply(release("a", token, at(20))), OutcomeOK) },
			want: "released",
		},
		"given up by a release that keeps the point": {
			then: func(h *harness, token uint64) {
				h.want(h.apply(checkpoint("a", token, "charged", "", at(15))), OutcomeOK)
				h.want(h.apply(release("a", token, at(20))), OutcomeOK)
			},
			want: "released",
		},
		"taken over": {
			then: func(h *harness, _ uint64) { h.want(h.apply(watched("a", "o2", lease10, ttl100, at(30))), OutcomeWon) },
			want: "taken_over",
		},
		"expired": {
			then: func(h *harness, _ uint64) { h.apply(expire(10, at(100))) },
			want: "expired",
		},
		"replaced by a claim after its TTL": {
			then: func(h *harness, _ uint64) { h.want(h.apply(watched("a", "o2", lease10, ttl100, at(100))), OutcomeWon) },
			want: "expired",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			token := h.apply(watched("a", "o1", lease10, ttl100, at(0))).Record.Token
			h.apply(expire(10, at(10)))
			// The holder is not fenced by the mark: it may extend and
			// checkpoint, and the record stays abandoned.
			h.want(h.apply(extend("a", token, lease10, at(11))), OutcomeOK)
			h.want(h.apply(checkpoint("a", token, "step", "", at(12))), OutcomeOK)
			wantEvents(t, h.m, 1)
			tc.then(h, token)
			wantEvents(t, h.m, 0, "1 abandoned a", "2 resolved a "+tc.want+" of 1")
			if n := h.m.Meta().Feed.Abandoned; n != 0 {
				t.Fatalf("%d records abandoned now after the resolution", n)
			}
			if r, ok := h.stored("a"); ok && r.Abandoned != 0 {
				t.Fatalf("record still marked: %+v", r)
			}
		})
	}
}

func TestAbandonmentIsNotReportedWhenSettledFirst(t *testing.T) {
	h := newHarness(t)
	// Taken over before any Expire ran: nothing to report, the new holder runs.
	h.apply(watched("a", "o1", lease10, ttl100, at(0)))
	h.want(h.apply(watched("a", "o2", lease10, ttl100, at(11))), OutcomeWon)
	// Given up by a release that keeps its point: its holder let go.
	token := h.apply(watched("b", "o1", lease10, ttl100, at(11))).Record.Token
	h.want(h.apply(checkpoint("b", token, "charged", "", at(12))), OutcomeOK)
	h.want(h.apply(release("b", token, at(13))), OutcomeOK)
	// Completed in time.
	token = h.apply(watched("c", "o1", lease10, ttl100, at(11))).Record.Token
	h.want(h.apply(complete("c", token, resp(200, "ok"), at(12))), OutcomeOK)
	h.apply(expire(10, at(30)))
	wantEvents(t, h.m, 0, "1 abandoned a") // the takeover's own lease lapsed by 30
}

// TestLeaseToTheEndOfTTL: a record whose lease runs to its TTL is abandoned
// and expires in one Expire, and the feed says both.
func TestLeaseToTheEndOfTTL(t *testing.T) {
	h := newHarness(t)
	c := watched("a", "o1", ttl100, ttl100, at(0))
	c.Tombstone = 30 * sec
	h.apply(c)
	res := h.apply(expire(10, at(100)))
	if res.Abandoned != 1 || res.Expired != 1 || res.Tombstoned != 1 {
		t.Fatalf("expire: %+v", res)
	}
	wantEvents(t, h.m, 0, "1 abandoned a", "2 resolved a expired of 1")
}

// TestEventsArePrunedAfterTheirRecord: an event is kept at least until its
// record is gone and for the record's TTL after the event, and never while
// it is still a record's mark; pruning goes oldest first.
func TestEventsArePrunedAfterTheirRecord(t *testing.T) {
	h := newHarness(t)
	h.apply(watched("a", "o1", lease10, ttl100, at(0)))
	h.apply(watched("b", "o1", lease10, 1000*sec, at(0)))
	h.apply(expire(10, at(10))) // 1 abandoned a, 2 abandoned b
	h.apply(expire(10, at(100)))
	wantEvents(t, h.m, 0, "1 abandoned a", "2 abandoned b", "3 resolved a expired of 1")
	// Event 3 is kept for a's TTL after it; event 1 (a deleted) and
	// event 2 (b marked still) are past KeepUntil only for 1.
	h.apply(expire(10, at(150)))
	wantEvents(t, h.m, 0, "2 abandoned b", "3 resolved a expired of 1")
	if f := h.m.Meta().Feed; f.PrunedThrough != 1 || f.Events != 2 || f.Seq != 3 {
		t.Fatalf("feed %+v", f)
	}
	// b stays marked until it ends, so event 2 holds event 3 back.
	h.apply(expire(10, at(500)))
	wantEvents(t, h.m, 0, "2 abandoned b", "3 resolved a expired of 1")
	h.apply(expire(10, at(1000))) // b expires: 4 resolved b
	// No record is left, but the events are: Expire is due to prune them.
	if next, ok := h.m.NextExpiry(); !ok || next != at(1010) {
		t.Fatalf("next expiry %d %v, want event 2's KeepUntil %d", next, ok, at(1010))
	}
	h.apply(expire(10, at(3000)))
	if next, ok := h.m.NextExpiry(); ok {
		t.Fatalf("next expiry %d with nothing left", next)
	}
	wantEvents(t, h.m, 0)
	if f := h.m.Meta().Feed; f.PrunedThrough != 4 || f.Events != 0 || f.StreamBytes != 0 {
		t.Fatalf("feed %+v", f)
	}
}

// TestPruningDoesNotDependOnGrouping: an Expire prunes the events that
// entries of its own group added exactly as it prunes committed ones, so a
// replica that applies the log in other groups (a follower catching up, a
// restart replaying it) holds the same feed.
func TestPruningDoesNotDependOnGrouping(t *testing.T) {
	log := []*Command{
		watched("a", "o1", lease10, ttl100, at(0)),
		expire(10, at(10)),                             // 1 abandoned a
		complete("a", tok(1), resp(200, "ok"), at(11)), // 2 resolved a, kept until 111
		expire(10, at(200)),
	}
	one, grouped := NewMachine(), NewMachine()
	var entries []Entry
	for i, c := range log {
		one.Apply(uint64(i+1), c)
		entries = append(entries, Entry{Index: uint64(i + 1), Cmd: c})
	}
	grouped.ApplyEntries(entries[:2])
	grouped.ApplyEntries(entries[2:])
	if one.Meta().Feed != grouped.Meta().Feed || one.Digest() != grouped.Digest() {
		t.Fatalf("feed %+v applied entry by entry, %+v in groups", one.Meta().Feed, grouped.Meta().Feed)
	}
	if f := one.Meta().Feed; f.PrunedThrough != 2 || f.Events != 0 {
		t.Fatalf("feed %+v, want both events pruned", f)
	}
}

// TestExpiredResolutionNamesTheAbandonedHolder: a new claim that replaces
// an expired abandoned record resolves it as expired, about the holder
// that abandoned it, not the new claimant.
func TestExpiredResolutionNamesTheAbandonedHolder(t *testing.T) {
	h := newHarness(t)
	token := h.apply(watched("a", "o1", lease10, ttl100, at(0))).Record.Token
	h.apply(expire(10, at(10)))
	h.want(h.apply(watched("a", "o2", lease10, ttl100, at(100))), OutcomeWon)
	evs := wantEvents(t, h.m, 1, "2 resolved a expired of 1")
	if evs[0].Token != token || evs[0].Attempt != 1 {
		t.Fatalf("the expired resolution names token %d attempt %d, want the abandoned holder's %d", evs[0].Token, evs[0].Attempt, token)
	}
}

func TestEventsAfterTheLastNumber(t *testing.T) {
	h := newHarness(t)
	h.apply(watched("a", "o1", lease10, ttl100, at(0)))
	h.apply(expire(10, at(10)))
	for _, after := range []uint64{1, 1 << 40, math.MaxUint64} {
		if evs, err := h.m.Events(after, 10); err != nil || len(evs) != 0 {
			t.Errorf("events after %d: %d, %v", after, len(evs), err)
		}
	}
}

func TestAbandonedNowPages(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.apply(watched(fmt.Sprint("k", i), "o1", lease10, ttl100, at(0)))
	}
	other := watched("x", "o1", lease10, ttl100, at(0))
	other.Key.Tenant = "other"
	h.apply(other)
	h.apply(expire(10, at(10)))
	token := h.m.mustGet(t, rk("k1")).Token
	h.want(h.apply(complete("k1", token, resp(200, ""), at(11))), OutcomeOK)

	var got []string
	after := uint64(0)
	for {
		page, next, err := h.m.AbandonedNow(testTenant, false, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page {
			got = append(got, ev.Key)
		}
		if next == 0 {
			break
		}
		after = next
	}
	if fmt.Sprint(got) != "[k0 k2 k3 k4]" {
		t.Fatalf("abandoned now: %v", got)
	}
	all, _, _ := h.m.AbandonedNow("", true, 0, 100)
	if len(all) != 5 {
		t.Fatalf("every tenant: %d records, want 5", len(all))
	}
}

func (m *Machine) mustGet(t *testing.T, k RecordKey) *Record {
	t.Helper()
	r, ok := m.Get(k)
	if !ok {
		t.Fatalf("no record %v", k)
	}
	return r
}

// TestFeedSnapshotRoundTrip: a state with events streams as version 4 and
// restores to the same digest, events and numbering; one without streams
// as version 3, which releases before the feed read.
func TestFeedSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.apply(watched("a", "o1", lease10, ttl100, at(0)))
	if v := snapshotBytes(t, h.m)[len(snapshotMagic)]; v != snapshotVersionNoFeed {
		t.Fatalf("a state without events streams as version %d", v)
	}
	h.apply(watched("b", "o1", lease10, ttl100, at(0)))
	h.apply(expire(10, at(10)))
	h.apply(expire(10, at(100)))
	h.apply(expire(10, at(150))) // prunes 1 and 2 (a and b deleted)
	h.apply(watched("c", "o1", lease10, ttl100, at(150)))
	h.apply(expire(10, at(160)))
	snap := snapshotBytes(t, h.m)
	if snap[len(snapshotMagic)] != snapshotVersionFeed {
		t.Fatalf("a state with events streams as version %d", snap[len(snapshotMagic)])
	}
	if int64(len(snap)) != SnapshotSize(h.m.Meta()) {
		t.Fatalf("stream of %d bytes, SnapshotSize says %d", len(snap), SnapshotSize(h.m.Meta()))
	}
	back := restored(t, snap)
	if back.Digest() != h.m.Digest() || back.Meta().Feed != h.m.Meta().Feed {
		t.Fatalf("restored feed %+v, digest %s; had %+v, %s", back.Meta().Feed, back.Digest(), h.m.Meta().Feed, h.m.Digest())
	}
	if fmt.Sprint(eventStrings(events(t, back))) != fmt.Sprint(eventStrings(events(t, h.m))) {
		t.Fatal("restored events differ")
	}
	// The numbering goes on where it was.
	back.Apply(h.index+1, &Command{Type: TypeRelease, Now: at(161), Key: rk("c"), Token: h.m.mustGet(t, rk("c")).Token})
	if evs := events(t, back); evs[len(evs)-1].Seq != h.m.Meta().Feed.Seq+1 {
		t.Fatalf("next event numbered %d after %d", evs[len(evs)-1].Seq, h.m.Meta().Feed.Seq)
	}
}

func eventStrings(evs []*Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, eventString(ev))
	}
	return out
}

func TestFeedIsInTheDigest(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	a.apply(watched("a", "o1", lease10, ttl100, at(0)))
	b.apply(claimWith("a", defFP, "o1", lease10, ttl100, at(0)))
	a.apply(expire(10, at(10)))
	b.apply(expire(10, at(10)))
	if a.m.Digest() == b.m.Digest() {
		t.Fatal("a state with an abandoned record and one without have the same digest")
	}
}

func TestEventCodecRoundTrip(t *testing.T) {
	ev := &Event{Seq: 7, Kind: EventResolved, Resolution: ResolvedTakenOver, Resolves: 3, RecordKey: rk("a"),
		Token: 99, Attempt: 2, Point: "charged", LeaseExpiresAt: at(1), At: at(2), KeepUntil: at(3)}
	got, err := DecodeEvent(EncodeEvent(ev))
	if err != nil || *got != *ev {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	bad := []*Event{
		{Seq: 0, Kind: EventAbandoned},
		{Seq: 1, Kind: EventAbandoned, Resolution: ResolvedExpired},
		{Seq: 2, Kind: EventResolved, Resolution: ResolvedCompleted}, // resolves nothing
		{Seq: 2, Kind: EventResolved, Resolution: ResolvedCompleted, Resolves: 2},
		{Seq: 2, Kind: 9},
	}
	for _, ev := range bad {
		if _, err := DecodeEvent(EncodeEvent(ev)); err == nil {
			t.Errorf("event %+v decoded", ev)
		}
	}
}

// feedCheck checks the feed after every step of a random log: numbers
// without gaps, each abandoned event resolved at most once and only after
// it, marks set only by Expire, the counts equal to a recount. A batch can
// add an event and prune it in the same step (a later Expire of the batch
// past its KeepUntil): a gap is allowed only for such events, numbered
// after the last step's and pruned already.
type feedCheck struct {
	seen     uint64
	now      int64                // FSM time before the step
	open     map[uint64]RecordKey // abandoned events not resolved yet
	resolved map[uint64]bool
}

func newFeedCheck() *feedCheck {
	return &feedCheck{open: map[uint64]RecordKey{}, resolved: map[uint64]bool{}}
}

func (f *feedCheck) check(m *Machine, c *Command, before, after map[RecordKey]*Record) error {
	meta := m.Meta()
	evs, err := m.Events(f.seen, 1<<20)
	if err != nil {
		return err
	}
	stepFrom := f.seen + 1 // the first event this step may have added
	prunedUnseen := func(seq uint64) bool { return seq >= stepFrom && seq <= meta.Feed.PrunedThrough }
	for _, ev := range evs {
		gapPruned := ev.Seq > f.seen+1 && prunedUnseen(ev.Seq-1)
		if (ev.Seq != f.seen+1 && !gapPruned) || ev.At < f.now || ev.At > meta.Now {
			return fmt.Errorf("event %d (at %d) after %d (step from %d to %d)", ev.Seq, ev.At, f.seen, f.now, meta.Now)
		}
		f.seen = ev.Seq
		switch ev.Kind {
		case EventAbandoned:
			if !hasType(c, TypeExpire) {
				return fmt.Errorf("abandoned event %d from a %v", ev.Seq, c.Type)
			}
			f.open[ev.Seq] = ev.RecordKey
		case EventResolved:
			if prunedUnseen(ev.Resolves) && !f.resolved[ev.Resolves] {
				f.resolved[ev.Resolves] = true // added and pruned in this step, never seen
				continue
			}
			if k, ok := f.open[ev.Resolves]; !ok || k != ev.RecordKey || f.resolved[ev.Resolves] {
				return fmt.Errorf("event %d resolves %d, which is not open for %v", ev.Seq, ev.Resolves, ev.RecordKey)
			}
			delete(f.open, ev.Resolves)
			f.resolved[ev.Resolves] = true
		}
	}
	f.now = meta.Now
	if f.seen < meta.Feed.PrunedThrough && meta.Feed.PrunedThrough >= stepFrom && len(evs) == 0 {
		f.seen = meta.Feed.PrunedThrough // every event of this step pruned in it
	}
	if f.seen != meta.Feed.Seq {
		return fmt.Errorf("read through %d, the feed is numbered to %d", f.seen, meta.Feed.Seq)
	}
	marked := 0
	for k, r := range after {
		if r.Abandoned == 0 {
			continue
		}
		marked++
		if f.open[r.Abandoned] != k {
			return fmt.Errorf("record %v marked by %d, which is not its open event", k, r.Abandoned)
		}
		if prev := before[k]; (prev == nil || prev.Abandoned != r.Abandoned) && !hasType(c, TypeExpire) {
			return fmt.Errorf("record %v marked by a %v", k, c.Type)
		}
	}
	if marked != len(f.open) || uint64(marked) != meta.Feed.Abandoned {
		return fmt.Errorf("%d records marked, %d events open, the feed counts %d", marked, len(f.open), meta.Feed.Abandoned)
	}
	kept, err := m.Events(0, 1<<20)
	if err != nil {
		return err
	}
	var size uint64
	for i, ev := range kept {
		if ev.Seq <= meta.Feed.PrunedThrough || (i > 0 && ev.Seq <= kept[i-1].Seq) {
			return fmt.Errorf("kept event %d after pruning through %d", ev.Seq, meta.Feed.PrunedThrough)
		}
		size += uint64(streamRecordSize(len(EncodeEvent(ev))))
	}
	if uint64(len(kept)) != meta.Feed.Events || size != meta.Feed.StreamBytes {
		return fmt.Errorf("%d events of %d bytes kept, the feed counts %d of %d", len(kept), size, meta.Feed.Events, meta.Feed.StreamBytes)
	}
	for seq := range f.open {
		if seq <= meta.Feed.PrunedThrough {
			return fmt.Errorf("open event %d pruned", seq)
		}
	}
	return nil
}

func hasType(c *Command, typ CommandType) bool {
	if c.Type == typ {
		return true
	}
	for _, sub := range c.Batch {
		if hasType(sub, typ) {
			return true
		}
	}
	return false
}

// craftFeedSnapshot writes a version 4 stream of recs and evs with the feed
// numbered to seq and pruned through pruned, with a valid Sum and CRC, so
// that only the feed's checks can refuse it.
func craftFeedSnapshot(recs []*Record, seq, pruned uint64, evs ...*Event) []byte {
	var e encoder
	e.buf = append(e.buf, snapshotMagic...)
	e.uvarint(snapshotVersionFeed)
	e.varint(at(0))
	e.uvarint(0) // applied index
	e.uvarint(0) // term
	e.uvarint(uint64(len(recs)))
	e.uvarint(seq)
	e.uvarint(pruned)
	e.uvarint(1) // total abandoned
	e.uvarint(uint64(len(evs)))
	var sum Sum
	for _, r := range recs {
		enc := EncodeRecord(r)
		sum.add(recordHash(enc))
		e.bytes(enc)
	}
	for _, ev := range evs {
		enc := EncodeEvent(ev)
		sum.add(eventHash(enc))
		e.bytes(enc)
	}
	e.buf = append(e.buf, sum[:]...)
	return binary.BigEndian.AppendUint32(e.buf, crc32.Checksum(e.buf, crcTable))
}

// TestRestoreChecksTheFeed: a stream's events must be every event after
// the pruned ones, in order, and each record's abandonment mark must be a
// kept abandonment of that record.
func TestRestoreChecksTheFeed(t *testing.T) {
	marked := rec(func(r *Record) { r.Watched, r.Abandoned = true, 2 })
	abandonedOf := func(seq uint64, k RecordKey) *Event {
		return &Event{Seq: seq, Kind: EventAbandoned, RecordKey: k, Token: 1, Attempt: 1, At: at(0), KeepUntil: at(100)}
	}
	good := craftFeedSnapshot([]*Record{marked}, 2, 1, abandonedOf(2, marked.RecordKey))
	if m := restored(t, good); m.Meta().Feed.Abandoned != 1 || m.Meta().Feed.Events != 1 {
		t.Fatalf("a valid feed restored as %+v", m.Meta().Feed)
	}
	other := RecordKey{Tenant: testTenant, Scope: testScope, Key: "other"}
	for name, snap := range map[string][]byte{
		"an event missing":          craftFeedSnapshot(nil, 3, 1, abandonedOf(2, other)),
		"a gap":                     craftFeedSnapshot(nil, 3, 0, abandonedOf(1, other), abandonedOf(3, other)),
		"a mark without its event":  craftFeedSnapshot([]*Record{marked}, 3, 2, abandonedOf(3, other)),
		"a mark on another's event": craftFeedSnapshot([]*Record{marked}, 2, 1, abandonedOf(2, other)),
		"a mark in version 3":       craftSnapshot(at(0), marked),
	} {
		mustRefuse(t, snap, "%s", name)
	}
}
