package fsm

import (
	"fmt"
	"math"
	"sync"
)

// The abandoned feed. A PENDING record whose lease ran out without a
// completion or release is the one case where nobody knows whether the side
// effect happened. A record claimed with WatchAbandon is due at the end of
// its lease (Record.dueAt), so the leader's Expire entries find it there and
// mark it abandoned, in FSM time, with an event numbered in the cluster's
// one sequence. Marking fences nobody: the holder may still extend,
// checkpoint or complete. Whatever ends the mark (a completion, a release,
// a takeover, the TTL) adds a resolved event. Events are pruned by Expire,
// oldest first, once past KeepUntil and no longer the mark of a record.

// awaitsAbandonment reports whether Expire marks r abandoned when its lease
// ends: a watched, held PENDING record not marked yet. A record given up by
// a release (no owner) is not abandoned: its holder let go on purpose.
func (r *Record) awaitsAbandonment() bool {
	return r.Watched && r.State == StatePending && !r.Tombstone && r.Owner != "" && r.Abandoned == 0
}

// markAbandoned stores r marked abandoned, with its event, and returns it.
func (t *tx) markAbandoned(r *Record) *Record {
	ev := t.emit(r, EventAbandoned, ResolutionNone, 0)
	marked := *r
	marked.Abandoned = ev.Seq
	t.meta.Feed.Total++
	t.put(&marked)
	return &marked
}

// resolveAbandoned ends old's mark when next (nil: deleted) replaces it in
// a way that settles it, adding the resolved event; an extend or a
// checkpoint by the holder keeps the mark. next is the handler's own copy.
func (t *tx) resolveAbandoned(old, next *Record) {
	if old.Abandoned == 0 {
		return
	}
	how := resolutionOf(old, next, t.meta.Now)
	if how == ResolutionNone {
		return
	}
	about := old
	if next != nil {
		next.Abandoned = 0
		if how != ResolvedExpired {
			about = next // completed, given up or taken over: what it is now
		}
	}
	t.emit(about, EventResolved, how, old.Abandoned)
}

// resolutionOf says how replacing old (marked abandoned) by next settles it.
func resolutionOf(old, next *Record, now int64) Resolution {
	switch {
	case next == nil && old.ExpiresAt <= now, next != nil && next.Tombstone:
		return ResolvedExpired
	case next == nil:
		return ResolvedReleased
	case next.State == StateCompleted:
		return ResolvedCompleted
	case next.Token != old.Token && old.ExpiresAt <= now:
		return ResolvedExpired // a new claim of the key replaced the expired record
	case next.Token != old.Token:
		return ResolvedTakenOver
	case released(next):
		return ResolvedReleased
	}
	return ResolutionNone
}

// emit numbers a new event about r and adds it to the group.
func (t *tx) emit(r *Record, kind EventKind, how Resolution, resolves uint64) *Event {
	t.meta.Feed.Seq++
	now := t.meta.Now
	ev := &Event{
		Seq: t.meta.Feed.Seq, Kind: kind, Resolution: how, Resolves: resolves, RecordKey: r.RecordKey,
		Token: r.Token, Attempt: r.Attempt, LeaseExpiresAt: r.LeaseExpiresAt, At: now,
		KeepUntil: max(r.deleteAt(), now+(r.ExpiresAt-r.CreatedAt)),
	}
	if r.Checkpoint != nil {
		ev.Point = r.Checkpoint.Point
	}
	enc := EncodeEvent(ev)
	t.meta.accountEvent(enc, 1)
	t.events = append(t.events, EventChange{Seq: ev.Seq, New: enc})
	return ev
}

// pruneEvents drops up to limit of the oldest events that are past
// KeepUntil, stopping at the first that is not (so the kept events are
// always every event after PrunedThrough) or that is still a record's mark.
// It sees the events this group added as well as the store's, so how raft
// groups the entries cannot change what is pruned.
func (t *tx) pruneEvents(limit int) int {
	if limit <= 0 || t.meta.Feed.Events == 0 {
		return 0
	}
	pruned := 0
	for _, enc := range t.oldestEvents(limit) {
		ev := mustEvent(enc)
		if ev.KeepUntil > t.meta.Now {
			break
		}
		if r, ok := t.get(ev.RecordKey); ok && ev.Kind == EventAbandoned && r.Abandoned == ev.Seq {
			break
		}
		t.meta.accountEvent(enc, -1)
		t.meta.Feed.PrunedThrough = ev.Seq
		t.events = append(t.events, EventChange{Seq: ev.Seq})
		pruned++
	}
	return pruned
}

// oldestEvents returns up to limit encoded events after PrunedThrough, in
// order: the store's, then those this group added (numbered after every
// stored one). Events this group pruned are at or below PrunedThrough.
func (t *tx) oldestEvents(limit int) [][]byte {
	after := t.meta.Feed.PrunedThrough
	out, err := t.store.Events(after, limit)
	if err != nil {
		panic(fmt.Sprintf("fsm: read the feed: %v", err))
	}
	if len(out) > 0 {
		after = mustEvent(out[len(out)-1]).Seq
	}
	for _, ch := range t.events {
		if len(out) == limit {
			break
		}
		if ch.New != nil && ch.Seq > after {
			out = append(out, ch.New)
		}
	}
	return out
}

// feedSignal wakes the feed's readers at each commit that adds events.
type feedSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (f *feedSignal) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

func (f *feedSignal) notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// FeedChanged returns a channel closed at the next commit that adds an
// event (or when the state is replaced by a restore). Take it before
// reading Events, so nothing committed in between is missed.
func (m *Machine) FeedChanged() <-chan struct{} { return m.feed.wait() }

// Events returns at most limit events numbered above after, in order,
// as of the last commit or a later one (it reads outside the lock, since
// reading the feed may wait for a handed batch to land).
func (m *Machine) Events(after uint64, limit int) ([]*Event, error) {
	if after == math.MaxUint64 {
		return nil, nil // nothing is numbered above it (and after+1 would wrap)
	}
	s, _ := m.reading()
	defer s.done()
	encs, err := s.Events(after, limit)
	if err != nil {
		return nil, fmt.Errorf("read the feed: %w", err)
	}
	out := make([]*Event, 0, len(encs))
	for _, enc := range encs {
		ev, err := DecodeEvent(enc)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// AbandonedNow pages through the records abandoned now, by their event:
// it reads at most scan events numbered above after and returns the
// abandoned events among them whose record is still marked by them (of
// tenant, or of every tenant when all), and the number to continue after
// (0 when the feed has no more).
func (m *Machine) AbandonedNow(tenant string, all bool, after uint64, scan int) ([]*Event, uint64, error) {
	// Nothing at or below PrunedThrough is kept: start past the store's
	// delete markers of pruned events.
	evs, err := m.Events(max(after, m.Meta().Feed.PrunedThrough), scan)
	if err != nil {
		return nil, 0, err
	}
	var out []*Event
	for _, ev := range evs {
		if ev.Kind != EventAbandoned || (!all && ev.Tenant != tenant) {
			continue
		}
		if r, ok := m.Get(ev.RecordKey); ok && r.Abandoned == ev.Seq {
			out = append(out, ev)
		}
	}
	if len(evs) < scan {
		return out, 0, nil
	}
	return out, evs[len(evs)-1].Seq, nil
}
