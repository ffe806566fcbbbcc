package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
)

// tx is the write set of one group of log entries: the records read and
// changed, FSM time, the applied index and the usage of the tenants
// touched. Handlers read through it, so a command sees what earlier
// commands of the same group wrote; commit hands the net change of every
// record to the store in one Commit, then publishes the new metadata.
type tx struct {
	m     *Machine
	store Store
	meta  Meta
	// touched holds every record the group read or wrote, by ordered key;
	// order lists them in the order first touched, so commit walks them in
	// an order that does not depend on map iteration.
	touched map[string]*txRecord
	order   []*txRecord
	// usage holds the usage of the tenants touched, as it is now.
	usage map[string]Usage
	// changed lists keys whose waiters to wake after the commit.
	changed []RecordKey
	// events are the feed's changes: events added, and (New nil) pruned.
	events []EventChange
}

// txRecord is one key in a tx: what the store holds (orig, and its
// encoding) and what the group made of it (cur, nil when absent).
type txRecord struct {
	key     []byte
	orig    *Record
	origEnc []byte
	cur     *Record
}

func (m *Machine) begin() *tx {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return &tx{m: m, store: m.cur.Store, meta: m.meta, touched: map[string]*txRecord{}}
}

// record returns k's entry in the tx, reading the store on first touch.
func (t *tx) record(k RecordKey) *txRecord {
	key := EncodeKey(k)
	if e, ok := t.touched[string(key)]; ok {
		return e
	}
	enc, ok, err := t.store.Get(key)
	e := &txRecord{key: key}
	if r := mustRecord(enc, ok, err); r != nil {
		e.orig, e.origEnc, e.cur = r, enc, r
	}
	t.touched[string(key)] = e
	t.order = append(t.order, e)
	return e
}

// get returns the record under k, expired or not.
func (t *tx) get(k RecordKey) (*Record, bool) {
	r := t.record(k).cur
	return r, r != nil
}

// at returns the record under k as commands see it at FSM time: live
// (before its TTL), a tombstone (past its TTL, within its tombstone time),
// or neither (r is nil). One lookup for both questions: every command asks
// them, and each lookup encodes the key.
func (t *tx) at(k RecordKey) (r *Record, live, tombstone bool) {
	r, ok := t.get(k)
	now := t.meta.Now
	switch {
	case !ok:
		return nil, false, false
	case r.ExpiresAt > now:
		return r, true, false
	case r.tombstoneAt(now):
		return r, false, true
	}
	return nil, false, false
}

// put stores r, replacing any record under the same key.
func (t *tx) put(r *Record) {
	e := t.record(r.RecordKey)
	if e.cur != nil {
		t.resolveAbandoned(e.cur, r)
		t.count(e.cur, -1)
	}
	t.count(r, 1)
	e.cur = r
}

func (t *tx) remove(k RecordKey) {
	e := t.record(k)
	if e.cur != nil {
		t.resolveAbandoned(e.cur, nil)
		t.count(e.cur, -1)
		e.cur = nil
	}
}

// usageOf returns tenant's usage as of this point of the group.
func (t *tx) usageOf(tenant string) Usage {
	if u, ok := t.usage[tenant]; ok {
		return u
	}
	t.m.mu.RLock()
	defer t.m.mu.RUnlock()
	return t.m.usage[tenant]
}

// count adds (delta 1) or removes (delta -1) r's cost from its tenant.
func (t *tx) count(r *Record, delta int) {
	u, c := t.usageOf(r.Tenant), cost(r)
	if delta > 0 {
		u.Keys += c.Keys
		u.Bytes += c.Bytes
	} else {
		u.Keys -= c.Keys
		u.Bytes -= c.Bytes
	}
	if t.usage == nil {
		t.usage = map[string]Usage{}
	}
	t.usage[r.Tenant] = u
}

// commit hands the group's net changes to the store, then publishes the
// new metadata and usage and wakes the waiters of changed keys. A group
// that applied nothing (every entry skipped) commits nothing.
func (m *Machine) commit(t *tx) {
	m.mu.RLock()
	applied := m.meta.Applied
	m.mu.RUnlock()
	if t.meta.Applied == applied {
		return
	}
	ch := &Changes{Records: t.recordChanges(), Usage: t.usageChanges(), Events: t.events}
	ch.Meta = t.meta
	if err := t.store.Commit(ch); err != nil {
		panic(fmt.Sprintf("fsm: commit entries up to %d: %v", t.meta.Applied, err))
	}
	m.mu.Lock()
	m.meta = t.meta
	for _, u := range ch.Usage {
		if u.Usage == (Usage{}) {
			delete(m.usage, u.Tenant)
		} else {
			m.usage[u.Tenant] = u.Usage
		}
	}
	m.mu.Unlock()
	for _, k := range t.changed {
		m.watch.notify(k)
	}
	if len(t.events) > 0 {
		m.feed.notify()
	}
}

// recordChanges turns every record the group changed into a RecordChange
// and keeps the counts, the digest's Sum and the stream size in t.meta.
func (t *tx) recordChanges() []RecordChange {
	var out []RecordChange
	for _, e := range t.order {
		if e.cur == e.orig {
			continue
		}
		rc := RecordChange{Key: e.key}
		if e.orig != nil {
			rc.HadOld, rc.OldExpiresAt = true, e.orig.dueAt()
			t.meta.account(e.orig, e.origEnc, -1)
		}
		if e.cur != nil {
			rc.New, rc.NewExpiresAt = EncodeRecord(e.cur), e.cur.dueAt()
			t.meta.account(e.cur, rc.New, 1)
		}
		out = append(out, rc)
	}
	return out
}

// account adds (delta 1) or removes (delta -1) a record, encoded as enc,
// from the counts, the Sum and the stream size.
func (m *Meta) account(r *Record, enc []byte, delta int) {
	h := recordHash(enc)
	size := uint64(streamRecordSize(len(enc)))
	pending, abandoned := uint64(0), uint64(0)
	if r.State == StatePending && !r.Tombstone {
		pending = 1
	}
	if r.Abandoned != 0 {
		abandoned = 1
	}
	if delta > 0 {
		m.Sum.add(h)
		m.Records++
		m.Pending += pending
		m.Feed.Abandoned += abandoned
		m.StreamBytes += size
		return
	}
	m.Sum.sub(h)
	m.Records--
	m.Pending -= pending
	m.Feed.Abandoned -= abandoned
	m.StreamBytes -= size
}

// accountEvent adds (delta 1) or removes (delta -1) an event, encoded as
// enc, from the feed's counts, the Sum and the stream size.
func (m *Meta) accountEvent(enc []byte, delta int) {
	h := eventHash(enc)
	size := uint64(streamRecordSize(len(enc)))
	if delta > 0 {
		m.Sum.add(h)
		m.Feed.Events++
		m.Feed.StreamBytes += size
		return
	}
	m.Sum.sub(h)
	m.Feed.Events--
	m.Feed.StreamBytes -= size
}

// streamRecordSize is what a record of n encoded bytes takes in a snapshot
// stream: its length prefix and itself.
func streamRecordSize(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n)) + n
}

// usageChanges lists the usage of every tenant touched, in tenant order.
func (t *tx) usageChanges() []TenantUsage {
	out := make([]TenantUsage, 0, len(t.usage))
	for tenant, u := range t.usage {
		out = append(out, TenantUsage{Tenant: tenant, Usage: u})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

// due returns up to limit records Expire must act on by FSM time (dueAt),
// in (dueAt, key) order, as this point of the group sees them: the
// store's, less those the group changed, plus those the group wrote. The
// store's it returns become their keys' entries in the tx (adopt), each
// both orig and cur: the caller replaces them, never edits one in place.
func (t *tx) due(limit int) []*Record {
	if limit <= 0 {
		return nil
	}
	now := t.meta.Now
	var dirty []*Record
	for _, e := range t.order {
		if e.cur != e.orig && e.cur != nil && e.cur.dueAt() <= now {
			dirty = append(dirty, e.cur)
		}
	}
	// The group may have changed up to len(t.order) of the store's due
	// records; reading that many more still leaves limit of them.
	stored, err := t.store.Due(now, limit+len(t.order))
	if err != nil {
		panic(fmt.Sprintf("fsm: read the expiry index: %v", err))
	}
	out := dirty
	read := map[*Record][]byte{}
	for _, enc := range stored {
		r := mustRecord(enc, true, nil)
		if e, ok := t.touched[string(EncodeKey(r.RecordKey))]; ok && e.cur != e.orig {
			continue // changed by the group: its current version is in dirty, if due
		}
		out = append(out, r)
		read[r] = enc
	}
	sort.Slice(out, func(i, j int) bool { return lessExpiry(out[i], out[j]) })
	out = out[:min(limit, len(out))]
	for _, r := range out {
		if enc, ok := read[r]; ok {
			t.adopt(r, enc)
		}
	}
	return out
}

// adopt enters r, read from the store as enc, as its key's entry in the
// tx, unless the key has one: Expire acts on every record due returns, and
// would otherwise read each from the store a second time (a read of the
// disk for a record written a lease ago, docs/PERFORMANCE.md).
func (t *tx) adopt(r *Record, enc []byte) {
	key := EncodeKey(r.RecordKey)
	if _, ok := t.touched[string(key)]; ok {
		return
	}
	e := &txRecord{key: key, orig: r, origEnc: enc, cur: r}
	t.touched[string(key)] = e
	t.order = append(t.order, e)
}

// lessExpiry orders records by dueAt, then key: the order Expire acts in
// on every node.
func lessExpiry(a, b *Record) bool {
	if a, b := a.dueAt(), b.dueAt(); a != b {
		return a < b
	}
	return bytes.Compare(EncodeKey(a.RecordKey), EncodeKey(b.RecordKey)) < 0
}
