package store

import (
	"maps"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/idemnode/idemnode/fsm"
)

// buffer gathers commits in one unindexed Pebble batch and hands it to
// Pebble whole once it is large (drainBytes). Pebble takes a batch of half
// a memtable or more as a flushable batch: sorted once and flushed as it
// is, where each small commit would insert every key into the memtable's
// skiplist, a cache miss at each level, which profiles put at 17 µs of a
// claim over three nodes (docs/PERFORMANCE.md). Lookups read the buffered
// records from a map; everything else that reads Pebble drains the buffer
// first, unless it can tell from the maps what the buffer changes (Due
// skips the index entries the buffer removes, NextExpiry the entries of
// every buffered key).
//
// A commit that fills the buffer hands the batch to a goroutine (handOff),
// which commits it while later commits gather in a new batch: sorting 20
// MiB of keys is too slow for the apply path, where it held every entry
// behind it. Lookups read the handed batch's records from a second map
// until it is in Pebble. At most one batch is in flight; a writer that
// needs Pebble to hold every commit waits for it (settle).
//
// Nothing here changes what survives a crash: the buffer, like a memtable,
// is lost with the process, and the Raft log replays it; batches reach
// Pebble in order, each whole. Sync drains it before it flushes, so the
// store is still durable through the last commit when a snapshot is
// recorded.
type buffer struct {
	// wmu orders every write into Pebble: a commit's append, a drain, a
	// hand-off, and unflushed.rotate, whose rule is that nothing is written
	// between a flush's start and its swap (so it waits for no hand-off in
	// flight).
	wmu   sync.Mutex
	batch *pebble.Batch // nil when empty
	// vals holds the records the batch's commits write at new positions,
	// ingested apart at a hand-off (values.go).
	vals freshValues
	// keys is room for the keys a commit adds to the batch, which copies
	// them.
	keys []byte
	// handed is the batch being committed in the background, nil when none.
	handed *handoff
	// insertedFrom is the earliest due time of the expiry index entries the
	// batch sets (inserted says there are some): Due drains the buffer when
	// it reaches that far. The entries it deletes Due skips instead (a
	// buffered change moved the record's due time), so a lease's end, which
	// deletes an entry at or before the next Due's time, drains nothing.
	inserted     bool
	insertedFrom int64
	// events says the batch changes the feed: it adds the events numbered
	// from addedFrom on (0: none) and prunes events up to prunedTo (0:
	// none).
	events              bool
	addedFrom, prunedTo uint64
	// clears is a sequence count around every clear of a record map (odd
	// while one runs): a NextExpiry walk that saw a buffered record skips
	// its entry in Pebble, and must not then miss it in the map.
	clears atomic.Uint64

	// rmu guards recs and handedRecs, read by lookups on any goroutine.
	rmu sync.RWMutex
	// recs holds the buffered records by key; a deleted one has nil enc.
	recs map[string]buffered
	// handedRecs holds the records of the handed batch, older than recs',
	// until Pebble has them.
	handedRecs map[string]buffered
}

// handoff is a batch committed in the background; err is set before done
// closes.
type handoff struct {
	done chan struct{}
	err  error
}

// buffered is a record's last change in the buffer: enc, due time and
// position (keys.go).
type buffered struct {
	enc []byte
	due int64
	pos uint64
}

// drainBytes is the batch size at which a commit drains the buffer: 5/8
// of a memtable, so that Pebble takes it as a flushable batch (from about
// half a memtable, counting its skiplist overhead).
func drainBytes(memTableSize uint64) int { return int(memTableSize * 5 / 8) }

// batchBytesFor is the room a batch handed off at limit bytes is made
// with: the last commit goes past the limit, by up to a quarter of it (5
// MiB, more than one Raft entry's 4 MiB); a larger one doubles the batch.
// Room never written is never touched (Pebble allocates it without
// zeroing), so it counts in the Go heap's accounting but adds little to
// the resident set.
func batchBytesFor(limit int) int { return limit + limit/4 }

// get returns key's buffered record: found says the buffer has its last
// change, and enc is nil if that change deleted it.
func (b *buffer) get(key []byte) (enc []byte, found bool) {
	r, found := b.last(key)
	return r.enc, found
}

// last returns key's last change in the buffer, if it has one.
func (b *buffer) last(key []byte) (buffered, bool) {
	b.rmu.RLock()
	defer b.rmu.RUnlock()
	r, found := b.recs[string(key)]
	if !found {
		r, found = b.handedRecs[string(key)]
	}
	return r, found
}

// append adds one commit to the batch, its records at the positions at
// and lastPos the last position given, which is handed off once it holds
// limit bytes; the caller holds wmu. It returns the lowest expiry key the
// commit inserts.
func (b *buffer) append(db *pebble.DB, c *fsm.Changes, at []placement, lastPos uint64, limit int) []byte {
	if b.batch == nil {
		// Sized to fill without growing: a batch that doubles its way to
		// 20 MiB copies itself over and over and ends in 32 MiB, and up
		// to three batches are held at once (Options.MemoryBound). Not
		// WithInitialSizeBytes: Pebble's batch pool keeps that option for
		// every later batch, its own small ones included.
		b.batch = db.NewBatchWithSize(batchBytesFor(limit))
	}
	lowest := writeRecords(b.batch, &b.vals, &b.keys, c.Records, at)
	for _, u := range c.Usage {
		if u.Usage == (fsm.Usage{}) {
			b.batch.Delete(usageKey(u.Tenant), nil)
			continue
		}
		b.batch.Set(usageKey(u.Tenant), encodeUsage(u.Usage), nil)
	}
	for _, ev := range c.Events {
		if ev.New == nil {
			b.batch.Delete(eventKey(ev.Seq), nil)
		} else {
			b.batch.Set(eventKey(ev.Seq), ev.New, nil)
		}
		b.noteEvent(ev)
	}
	meta, _ := c.Meta.MarshalBinary()
	b.batch.Set(metaKey, meta, nil)
	b.batch.Set(positionKey, encodePosition(lastPos), nil)
	b.note(c.Records, at)
	return lowest
}

// note records the changes in recs and insertedFrom.
func (b *buffer) note(changes []fsm.RecordChange, at []placement) {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if b.recs == nil {
		b.recs = map[string]buffered{}
	}
	for i, rc := range changes {
		b.recs[string(rc.Key)] = buffered{enc: rc.New, due: rc.NewExpiresAt, pos: at[i].new}
		if rc.New != nil && !keepsExpiry(rc) {
			b.insert(rc.NewExpiresAt)
		}
	}
}

// noteEvent records what an event change does to the feed's numbers.
func (b *buffer) noteEvent(ev fsm.EventChange) {
	if !b.events {
		b.events, b.addedFrom, b.prunedTo = true, 0, 0
	}
	switch {
	case ev.New == nil:
		b.prunedTo = max(b.prunedTo, ev.Seq)
	case b.addedFrom == 0 || ev.Seq < b.addedFrom:
		b.addedFrom = ev.Seq
	}
}

// feedCurrentBelow says whether Pebble holds the feed's events numbered
// above after as the batch leaves them, up to (not including) before: the
// batch prunes none of them, and adds none below before.
func (b *buffer) feedCurrentBelow(after uint64) (before uint64, ok bool) {
	switch {
	case !b.events || b.prunedTo <= after && b.addedFrom == 0:
		return math.MaxUint64, true
	case b.prunedTo <= after:
		return b.addedFrom, true
	}
	return 0, false
}

func (b *buffer) insert(at int64) {
	if !b.inserted || at < b.insertedFrom {
		b.inserted, b.insertedFrom = true, at
	}
}

// full reports whether a commit should drain the buffer.
func (b *buffer) full(limit int) bool { return b.batch != nil && b.batch.Len()+b.vals.bytes >= limit }

// insertsBy reports whether the batch sets an expiry index entry due at or
// before t.
func (b *buffer) insertsBy(t int64) bool { return b.inserted && b.insertedFrom <= t }

// removes reports whether the buffer deletes the expiry index entry (at,
// key) that Pebble holds: the key's last buffered change deleted the
// record or gave it another due time (a record has one entry, at its due
// time). The caller holds wmu with the handed batch settled.
func (b *buffer) removes(at int64, key []byte) bool {
	r, ok := b.last(key)
	return ok && (r.enc == nil || r.due != at)
}

// drain hands the buffered commits to Pebble, if any, once the handed
// batch is in; the caller holds wmu. The unflushed tracker learns their
// keys first, so no lookup skips the memtables for them; the map is
// cleared only after the commit, so a lookup finds each record in one or
// the other.
func (s *Store) drain() error {
	if ok, err := s.pending(); !ok {
		return err
	}
	b := &s.buf
	b.vals.writeTo(b.batch)
	s.unflushed.add(maps.Keys(b.recs), len(b.recs), b.batch.Len())
	err := b.batch.Commit(pebble.NoSync)
	b.batch.Close()
	b.batch, b.vals, b.inserted, b.events = nil, freshValues{}, false, false
	if err != nil {
		return s.fail("commit the buffered entries", err)
	}
	b.clearRecs(b.recs)
	// To a NextExpiry walking Pebble meanwhile, the buffered keys are
	// inserted now: expLow must not pass them (endPeek).
	s.mu.Lock()
	s.noteInsertedLocked(s.bufferedLow)
	s.bufferedLow = nil
	s.mu.Unlock()
	return nil
}

// handOff moves the buffered commits to the handed batch and commits it
// on another goroutine, after the one handed before; the caller holds
// wmu. Its records move to handedRecs in one step, so a lookup finds each
// in one map or the other, and leave it only once Pebble has them. A
// store closing or closed drains in place.
func (s *Store) handOff() error {
	if ok, err := s.pending(); !ok {
		return err
	}
	if !s.acquire() {
		return s.drain()
	}
	b := &s.buf
	batch, vals, h := b.batch, b.vals, &handoff{done: make(chan struct{})}
	b.batch, b.vals, b.inserted, b.events, b.handed = nil, freshValues{}, false, false, h
	b.rmu.Lock()
	b.recs, b.handedRecs = b.handedRecs, b.recs // handedRecs is empty once settled
	b.rmu.Unlock()
	s.mu.Lock()
	low := s.bufferedLow
	s.handedLow, s.bufferedLow = low, nil
	s.mu.Unlock()
	go s.commitHanded(batch, &vals, h)
	return nil
}

// commitHanded ingests the handed records, commits the handed batch,
// then drops its records from handedRecs. The unflushed tracker learns
// their keys first, here rather than on the apply path: until the commit,
// lookups find the records in handedRecs, and no flush starts while a
// batch is handed (Commit), so the keys join the generation the batch is
// written in. It releases its reference before it says it is done, so a
// Close that settles closes the database.
func (s *Store) commitHanded(batch *pebble.Batch, vals *freshValues, h *handoff) {
	defer close(h.done)
	defer s.release()
	// Nothing writes handedRecs, the field or the map, until h.done is
	// closed, but this goroutine's clearRecs below: reading it needs no
	// lock.
	recs := s.buf.handedRecs
	s.unflushed.add(maps.Keys(recs), len(recs), batch.Len())
	if err := s.ingestValues(vals); err != nil {
		batch.Close()
		h.err = s.fail("commit the buffered records", err)
		return
	}
	if s.opts.beforeHandedCommit != nil {
		s.opts.beforeHandedCommit()
	}
	err := batch.Commit(pebble.NoSync)
	batch.Close()
	if err != nil {
		h.err = s.fail("commit the buffered entries", err)
		return
	}
	s.buf.clearRecs(s.buf.handedRecs)
	s.mu.Lock()
	s.noteInsertedLocked(s.handedLow)
	s.handedLow = nil
	s.mu.Unlock()
}

// settle waits for the handed batch, if any, to be in Pebble; the caller
// holds wmu. A batch that failed stays handed, so every later write
// fails too, and no later batch reaches Pebble without it.
func (s *Store) settle() error {
	h := s.buf.handed
	if h == nil {
		return nil
	}
	<-h.done
	if h.err != nil {
		return h.err
	}
	s.buf.handed = nil
	return nil
}

// pending settles the handed batch and reports whether the buffer holds
// commits to write; the caller holds wmu.
func (s *Store) pending() (bool, error) {
	if err := s.settle(); err != nil {
		return false, err
	}
	return s.buf.batch != nil, nil
}

// clearRecs empties recs, one of the record maps, once Pebble holds its
// records, inside the clears count.
func (b *buffer) clearRecs(recs map[string]buffered) {
	b.clears.Add(1)
	b.rmu.Lock()
	clear(recs)
	b.rmu.Unlock()
	b.clears.Add(1)
}

// handing reports whether a handed batch is still being committed; the
// caller holds wmu.
func (b *buffer) handing() bool {
	if b.handed == nil {
		return false
	}
	select {
	case <-b.handed.done:
		return false
	default:
		return true
	}
}

// drainNow drains the buffer for a reader of Pebble on any goroutine.
func (s *Store) drainNow() error {
	s.buf.wmu.Lock()
	defer s.buf.wmu.Unlock()
	return s.drain()
}

// addKeys adds the keys of the buffered records to f; the caller holds
// wmu.
func (b *buffer) addKeys(f *keyFilter) {
	b.rmu.RLock()
	defer b.rmu.RUnlock()
	for _, recs := range [...]map[string]buffered{b.recs, b.handedRecs} {
		for k, r := range recs {
			if r.enc != nil {
				f.add([]byte(k))
			}
		}
	}
}

// has reports whether key's last change is in the buffer.
func (b *buffer) has(key []byte) bool {
	b.rmu.RLock()
	defer b.rmu.RUnlock()
	_, ok := b.recs[string(key)]
	if !ok {
		_, ok = b.handedRecs[string(key)]
	}
	return ok
}

// nextDue returns the earliest due time of the records stored by the
// buffered commits, the handed batch's included where recs has no later
// change.
func (b *buffer) nextDue() (next int64, found bool) {
	b.rmu.RLock()
	defer b.rmu.RUnlock()
	for k, r := range b.handedRecs {
		if _, changed := b.recs[k]; !changed && r.enc != nil && (!found || r.due < next) {
			next, found = r.due, true
		}
	}
	for _, r := range b.recs {
		if r.enc != nil && (!found || r.due < next) {
			next, found = r.due, true
		}
	}
	return next, found
}
