package fsm

import (
	"fmt"
	"sync"
)

// Machine is the deterministic state machine over a Store. It decides every
// outcome; the store keeps the records. Apply, Install and Restore must be
// called from one goroutine (Raft's apply loop); reads may run concurrently.
type Machine struct {
	// mu guards cur, meta and usage: Apply holds it for writing only while
	// it publishes a commit, reads hold it for reading only while they take
	// cur and meta, never across the store's I/O (storeRef says why a read
	// outside it is still consistent), and Install swaps the store under
	// it. The applying goroutine reads the store without it, since it is
	// the only one that changes or swaps the store.
	mu  sync.RWMutex
	cur *storeRef
	// meta is the store's metadata as of the last commit; usage is every
	// tenant's usage, kept here because quotas read it on every claim.
	meta  Meta
	usage map[string]Usage

	watch watchers
	feed  feedSignal
}

// New returns a Machine over s, at the state s holds.
func New(s Store) (*Machine, error) {
	m := &Machine{}
	if err := m.adopt(s); err != nil {
		return nil, err
	}
	return m, nil
}

// adopt makes s the store, loading its metadata and usage.
func (m *Machine) adopt(s Store) error {
	usage, err := s.Usages()
	if err != nil {
		return fmt.Errorf("load tenant usage: %w", err)
	}
	m.mu.Lock()
	m.cur, m.meta, m.usage = &storeRef{Store: s}, s.Meta(), usage
	m.mu.Unlock()
	return nil
}

// Entry is one log entry for ApplyEntries: a command, or (Cmd nil) a Raft
// configuration change, whose encoding Config then holds.
type Entry struct {
	Index, Term uint64
	Cmd         *Command
	Config      []byte
}

// Apply applies one command decided at log entry index and returns its
// result. The result depends only on the state, the command and index.
func (m *Machine) Apply(index uint64, c *Command) Result {
	return m.ApplyEntries([]Entry{{Index: index, Cmd: c}})[0]
}

// ApplyEntries applies consecutive log entries as one store commit and
// returns a result per entry. Entries at or below the store's applied index
// are skipped with a zero Result: the store has them already (after a
// restart, or a snapshot that was ahead of the log), and claims and
// completes must never be applied on top of a newer state.
func (m *Machine) ApplyEntries(entries []Entry) []Result {
	t := m.begin()
	out := make([]Result, len(entries))
	for i, e := range entries {
		if e.Index <= t.meta.Applied {
			continue
		}
		t.meta.Applied, t.meta.Term = e.Index, e.Term
		switch {
		case e.Cmd != nil:
			out[i] = t.applyEntry(e.Index, e.Cmd)
		case e.Config != nil:
			t.meta.ConfigIndex, t.meta.Config = e.Index, e.Config
		}
	}
	m.commit(t)
	return out
}

// applyEntry applies one command, a batch member by member.
func (t *tx) applyEntry(index uint64, c *Command) Result {
	if c.Type != TypeBatch {
		return t.applyOne(c, TokenFor(index, 0))
	}
	res := Result{Outcome: OutcomeOK, Batch: make([]Result, len(c.Batch))}
	for i, sub := range c.Batch {
		res.Batch[i] = t.applyOne(sub, TokenFor(index, i))
	}
	return res
}

// applyOne advances FSM time and dispatches to the command's handler. FSM
// time never goes backwards, so a new leader whose clock lags cannot revive
// an expired lease or record.
func (t *tx) applyOne(c *Command, token uint64) Result {
	if c.Type == TypeIdentify {
		// Not an operation on records: it leaves FSM time, and so the
		// digest, as they were (a state and its upgraded self compare
		// equal).
		return t.applyIdentify(c)
	}
	t.meta.Now = max(t.meta.Now, c.Now)
	var res Result
	switch c.Type {
	case TypeClaim:
		res = t.applyClaim(c, token)
	case TypeComplete:
		res = t.applyComplete(c)
	case TypeRelease:
		res = t.applyRelease(c)
	case TypeExtend:
		res = t.applyExtend(c)
	case TypeCheckpoint:
		res = t.applyCheckpoint(c)
	case TypeExpire:
		return t.applyExpire(c)
	default:
		// Decoding refuses unknown types and nested batches, so only a
		// caller bug gets here; answering keeps every node identical.
		return Result{Outcome: OutcomeUnknown}
	}
	if res.Outcome == OutcomeOK || res.Outcome == OutcomeWon {
		t.changed = append(t.changed, c.Key)
	}
	return res
}

// Applied returns the index of the last log entry applied.
func (m *Machine) Applied() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.Applied
}

// Get returns the live record under k, as of the last applied command (or
// a later one). A record past its TTL is absent for every read, deleted or
// not.
func (m *Machine) Get(k RecordKey) (*Record, bool) {
	s, meta := m.reading()
	defer s.done()
	r := mustRecord(s.Get(EncodeKey(k)))
	if !liveAt(r, meta.Now) {
		return nil, false
	}
	return r, true
}

// Tombstone returns the record under k while it is a tombstone: past its
// TTL, within its tombstone time (see Record.TombstoneFor). What a
// tombstone keeps is all it returns, cut down or not yet.
func (m *Machine) Tombstone(k RecordKey) (*Record, bool) {
	s, meta := m.reading()
	defer s.done()
	r := mustRecord(s.Get(EncodeKey(k)))
	if !tombstoneAtRead(r, meta.Now) {
		return nil, false
	}
	return tombstoneOf(r), true
}

// GetWatch returns the live record under k and, when it is PENDING, a
// channel that is closed at the next change of k (nil otherwise). Only
// PENDING records are watched because only they are sure to change again
// (complete, release or TTL), which bounds the watch table.
//
// It registers before it reads, so no change slips between the two without
// a lock held across the read: a commit wakes k's watchers after the store
// holds it, so a change either is in what the read finds (the wake-up is
// then spurious) or comes after the registration and closes the channel.
// A registration the answer does not need is dropped.
func (m *Machine) GetWatch(k RecordKey) (*Record, bool, <-chan struct{}) {
	w := m.watch.add(k)
	r, ok := m.Get(k)
	if !ok || r.State != StatePending {
		m.watch.drop(k, w)
		return r, ok, nil
	}
	return r, ok, w.ch
}

// Len returns the number of stored records, expired ones not yet deleted included.
func (m *Machine) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return int(m.meta.Records)
}

// Counts returns how many stored records are PENDING and COMPLETED
// (expired ones not yet deleted included).
func (m *Machine) Counts() (pending, completed int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return int(m.meta.Pending), int(m.meta.Records - m.meta.Pending)
}

// Now returns FSM time in Unix nanoseconds.
func (m *Machine) Now() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.Now
}

// Meta returns the store's metadata as of the last applied entry.
func (m *Machine) Meta() Meta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta
}

// NextExpiry returns when Expire next has work: the earliest due time of any
// stored record, or when the feed's oldest event can be pruned. The leader
// proposes Expire only then. It reads the store outside the lock (reading
// the feed may wait for a handed batch to land, store/DESIGN.md), so it
// may answer for a later commit than the last published: a schedule, which
// Expire's own reads decide on.
func (m *Machine) NextExpiry() (int64, bool) {
	s, meta := m.reading()
	defer s.done()
	at, ok, err := s.NextExpiry()
	if err != nil {
		panic(fmt.Sprintf("fsm: read the expiry index: %v", err))
	}
	if prune, due := nextPrune(s, meta); due && (!ok || prune < at) {
		return prune, true
	}
	return at, ok
}

// nextPrune is when Expire can next prune the feed's oldest event, reading s
// at meta. An event that is still a record's mark waits for that record,
// whose own due time brings the Expire that settles it.
func nextPrune(s Store, meta Meta) (int64, bool) {
	if meta.Feed.Events == 0 {
		return 0, false
	}
	encs, err := s.Events(meta.Feed.PrunedThrough, 1)
	if err != nil {
		panic(fmt.Sprintf("fsm: read the feed: %v", err))
	}
	if len(encs) == 0 {
		return 0, false
	}
	ev := mustEvent(encs[0])
	if ev.Kind == EventAbandoned {
		if r := mustRecord(s.Get(EncodeKey(ev.RecordKey))); r != nil && r.Abandoned == ev.Seq {
			return 0, false
		}
	}
	return ev.KeepUntil, true
}

// Digest returns the state digest (DigestVersion) as of the last applied command.
func (m *Machine) Digest() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.digest()
}

// DigestAt returns the applied index and the digest of the state at that
// index, read together.
func (m *Machine) DigestAt() (uint64, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.meta.Applied, m.meta.digest()
}

// Sync makes every applied entry durable in the store. It holds no lock
// while the store flushes: commits and reads go on meanwhile (a store's
// Sync is safe beside them, and beside its own replacement).
func (m *Machine) Sync() error {
	m.mu.RLock()
	s := m.cur.Store
	m.mu.RUnlock()
	return s.Sync()
}

// View returns a point-in-time view of the store, for a snapshot stream.
// Taking one drains the store's write buffer, so it runs outside the lock;
// the view holds its store open past an Install.
func (m *Machine) View() (View, error) {
	s, _ := m.reading()
	defer s.done()
	return s.View()
}

// NewBuilder returns a builder of a fresh store to Install.
func (m *Machine) NewBuilder() (Builder, error) {
	s, _ := m.reading()
	defer s.done()
	return s.NewBuilder()
}

// Install swaps in the store b built (a restored snapshot) and closes the
// old one, then wakes every watcher, since any key may have changed.
func (m *Machine) Install(b Builder) error {
	s, err := b.Install()
	if err != nil {
		b.Abort()
		return fmt.Errorf("install restored store: %w", err)
	}
	m.mu.RLock()
	old := m.cur
	m.mu.RUnlock()
	if err := m.adopt(s); err != nil {
		s.Close()
		return err
	}
	m.watch.notifyAll()
	m.feed.notify() // the feed may have moved on, or been pruned past a reader
	// The new store is in place: a failure to close the old one changes
	// nothing of the state (a disk fault there reaches the store's own
	// fault handler), so the install stands.
	// It waits for the reads still running on the old store.
	_ = old.close()
	return nil
}

// Store returns the current store (it changes when a snapshot is installed).
func (m *Machine) Store() Store {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cur.Store
}

// Close closes the store once the reads running on it are done.
func (m *Machine) Close() error {
	m.mu.RLock()
	s := m.cur
	m.mu.RUnlock()
	return s.close()
}

// mustRecord decodes a store's answer. A store error or a record that does
// not decode is a damaged disk: deciding on it would diverge this node, so
// the node stops (the cluster's store exits with code 3 before this).
func mustRecord(enc []byte, ok bool, err error) *Record {
	if err != nil {
		panic(fmt.Sprintf("fsm: read a record: %v", err))
	}
	if !ok {
		return nil
	}
	r, err := DecodeRecord(enc)
	if err != nil {
		panic(fmt.Sprintf("fsm: stored record: %v", err))
	}
	return r
}
