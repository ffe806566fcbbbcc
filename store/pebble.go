// Package store keeps the state machine's records on disk in Pebble: the
// production implementation of fsm.Store. It knows keys and encodings,
// never outcomes. See DESIGN.md for the layout and the durability rules.
package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// Defaults bound a node's memory whatever it stores: the block cache, the
// memtables and the key filter (MemoryBound).
const (
	DefaultCacheSize     = 128 << 20
	DefaultMemTableSize  = 32 << 20
	DefaultKeyFilterSize = 32 << 20
)

// Options configure a store.
type Options struct {
	// CacheSize is the block cache in bytes (DefaultCacheSize when 0).
	CacheSize int64
	// MemTableSize is one memtable in bytes (DefaultMemTableSize when 0).
	MemTableSize uint64
	// KeyFilterSize is the in-memory filter of stored keys (keyfilter.go)
	// in bytes, DefaultKeyFilterSize when 0; negative turns it off. A
	// rebuild holds two for a while.
	KeyFilterSize int64
	// Fatal is called with an error the store cannot go on after: a damaged
	// block found on a read, a failed write. The node exits there (code 3),
	// never serving a damaged store as if the record were absent. nil
	// panics.
	Fatal func(error)
	// FS is the file system (tests use a crashable in-memory one); nil is the disk.
	FS vfs.FS
	// Logger receives Pebble's own log lines; nil discards them.
	Logger pebble.Logger

	// flushEvery is the bytes committed between the flushes that let
	// lookups skip the memtables (unflushed.go); 3/4 of MemTableSize when
	// 0. Tests make it small, so that lookups cross many flushes.
	flushEvery int
	// drainEvery is the size of the write buffer (buffer.go) that a commit
	// hands to Pebble; drainBytes(MemTableSize) when 0.
	drainEvery int
	// ownSetKeys is the batch size, in keys, from which the unflushed
	// tracker hashes a batch into a set of its own (unflushed.go);
	// defaultOwnSetKeys when 0. Tests make it 1, so that their small
	// hand-offs take the path of a real one.
	ownSetKeys int
	// beforeHandedCommit, if set, runs before a handed batch is committed:
	// tests slow it, so that commits and reads run while it is in flight.
	beforeHandedCommit func()
	// walkChunk is the bytes of values a view's walk copies out before it
	// closes its iterator and hands them on (view.go); defaultWalkChunk
	// when 0. Tests make it 1, so that every record starts a chunk.
	walkChunk int
	// dueSoonSize bounds the records kept for Due (duesoon.go);
	// defaultDueSoonSize when 0, none when negative.
	dueSoonSize int64
}

// defaultDueSoonSize keeps the lease ends of some 100 k claims of the
// benchmark's (337 bytes each, duesoon.go): 20-30 s of its claims.
const defaultDueSoonSize = 32 << 20

// Store is the Pebble fsm.Store.
type Store struct {
	root  string // the fsm dir holding CURRENT and the store dirs
	name  string // this store's dir under root
	opts  Options
	db    *pebble.DB
	po    *pebble.Options // db's, for the tables a hand-off ingests
	cache *pebble.Cache
	// refs counts the store's owner and its open views; the last release
	// closes the database, so a swap never pulls it from under a view.
	refs atomic.Int32

	// brk trips at the first fatal error: a Sync or Close waiting for a
	// flush that will never finish (the disk refuses it, and Pebble
	// retries it forever) returns instead.
	brk *breaker

	// mu guards meta, expLow, insertedLow, bufferedLow and handedLow.
	mu   sync.Mutex
	meta fsm.Meta
	// bufferedLow and handedLow are the lowest expiry keys inserted by the
	// commits in the write buffer and in its handed batch: expLow must not
	// rise past them, since Pebble's index may not show them yet.
	bufferedLow, handedLow []byte
	// expLow is at or below every live expiry key (stored in Pebble and
	// not removed by the write buffer, or inserted by it): Due and NextExpiry
	// start there, past the delete markers earlier Expires left, which
	// Pebble would otherwise step over one by one until compaction drops
	// them (a queue's classic cost in an LSM). Completions leave such
	// markers too: a watched record's entry moves from its lease end to its
	// expiry (fsm/abandon.go).
	expLow []byte
	// peekMu lets one NextExpiry at a time raise expLow; insertedLow is the
	// lowest expiry key committed since it read expLow (see peekExpiry).
	peekMu      sync.Mutex
	insertedLow []byte
	peeking     bool

	// unflushed knows which records may be in a memtable.
	unflushed *unflushed
	// iters keeps the sstables' iterators between lookups (iters.go).
	iters iterCache
	// filters answers most lookups of a fresh key (filters.go).
	filters filters
	// buf gathers commits into large batches (buffer.go).
	buf buffer
	// soon keeps the records coming due soon, for Due (duesoon.go);
	// guarded by buf.wmu.
	soon dueSoon
	// lastPos is the position of the last record written (keys.go);
	// duePos holds the positions Due read records at in Pebble since the
	// last commit, for the commit that expires them. Both guarded by
	// buf.wmu; every commit clears duePos, so what it holds is current.
	lastPos uint64
	duePos  map[string]uint64
	// closed is closed by Close, ending the filter builds, which Close
	// waits for: a build holds the database open.
	closed    chan struct{}
	closeOnce sync.Once
	builds    sync.WaitGroup
}

var _ fsm.Store = (*Store)(nil)

func (o Options) withDefaults() Options {
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.walkChunk == 0 {
		o.walkChunk = defaultWalkChunk
	}
	switch {
	case o.dueSoonSize == 0:
		o.dueSoonSize = defaultDueSoonSize
	case o.dueSoonSize < 0:
		o.dueSoonSize = 0
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	switch {
	case o.KeyFilterSize == 0:
		o.KeyFilterSize = DefaultKeyFilterSize
	case o.KeyFilterSize < 0:
		o.KeyFilterSize = 0
	}
	if o.flushEvery <= 0 {
		o.flushEvery = int(o.MemTableSize * 3 / 4)
	}
	if o.drainEvery <= 0 {
		o.drainEvery = drainBytes(o.MemTableSize)
	}
	if o.ownSetKeys <= 0 {
		o.ownSetKeys = defaultOwnSetKeys
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if _, ok := o.FS.(tableFS); !ok {
		o.FS = tableFS{o.FS}
	}
	if o.Fatal == nil {
		o.Fatal = func(err error) { panic(err) }
	}
	if o.Logger == nil {
		o.Logger = quietLogger{fatal: o.Fatal}
	}
	return o
}

// MemoryBound is the most memory the store's parts hold with these
// options, whatever it stores (the node adds its own: Raft, gRPC):
//   - the block cache;
//   - four memtables: Pebble queues them, with the handed batches, up to
//     twice MemTableSize (its stop-writes threshold), the last one past
//     it, and keeps one more to recycle;
//   - the write buffer and the handed batch not yet in that queue;
//   - the key filter, twice while it is rebuilt;
//   - the records kept for Due (duesoon.go);
//   - the write buffers of the tables written at once (tablefs.go).
//
// It counts generously where Pebble shares: the memtables and the queued
// batches are reserved from the block cache, which shrinks to make room.
// It does not count what an iterator pins (the memtables of the moment it
// opened) for as long as it is open: a lookups' kept iterator until the next
// flush, a filter build while it reads the keys, a snapshot stream only
// while it reads a chunk of 1 MiB, which it also holds (view.go). Nor does
// it count the buffered records' map beside each batch; the memory measured
// at 30 M records stays under it (docs/PERFORMANCE.md).
func (o Options) MemoryBound() int64 {
	o = o.withDefaults()
	return o.CacheSize + 4*int64(o.MemTableSize) + 2*int64(batchBytesFor(o.drainEvery)) + 2*o.KeyFilterSize +
		o.dueSoonSize + tableWriters*tableWriteBytes
}

// pebbleOptions: the store applies without Pebble's WAL, since the Raft log
// already holds every entry (DESIGN.md); Bloom filters on every level,
// since most lookups are of a fresh key that is nowhere.
func (o Options) pebbleOptions(cache *pebble.Cache, brk *breaker) *pebble.Options {
	po := &pebble.Options{
		FS:           o.FS,
		Cache:        cache,
		MemTableSize: o.MemTableSize,
		DisableWAL:   true,
		Logger:       o.Logger,
		// A flush or compaction that fails (a full disk, an I/O error) is
		// retried by Pebble forever, and a block whose checksum fails would
		// be logged as fatal: the node stops either way, with exit code 3.
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { brk.fail("background flush or compaction", err) },
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				brk.fail("read "+info.Path, fmt.Errorf("%w: %w", ErrCorrupt, info.Details))
			},
			// A single delete that met two sets of its key would let the
			// older come back: an expiry index entry of a record that
			// is gone or due at another time, or a record at a position
			// the record has left (writeRecords).
			PossibleAPIMisuse: func(info pebble.PossibleAPIMisuseInfo) {
				if info.Kind == pebble.NondeterministicSingleDelete {
					brk.fail("compact the records or the expiry index", fmt.Errorf("%w: %s", ErrCorrupt, info))
				}
			},
		},
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	po.EnsureDefaults()
	return po
}

// openDB opens (creating when absent) the Pebble database in dir and
// returns its format: this release's, or an older one, which Open
// migrates.
func openDB(dir string, o Options, cache *pebble.Cache, brk *breaker) (*pebble.DB, uint64, error) {
	db, err := pebble.Open(dir, o.pebbleOptions(cache, brk))
	if err != nil {
		return nil, 0, fmt.Errorf("open store %s: %w", dir, err)
	}
	version, err := checkFormat(db)
	if err == nil && version != FormatVersion && version != formatRecordsByKey && version != formatExpiryLast {
		err = fmt.Errorf("%w: format version %d, this release reads %d to %d", ErrCorrupt, version, formatRecordsByKey, FormatVersion)
	}
	if err != nil {
		db.Close()
		return nil, 0, fmt.Errorf("store %s: %w", dir, err)
	}
	return db, version, nil
}

// openNewDB opens a database in a dir that holds none, in this release's
// format, with the Pebble options made already.
func openNewDB(dir string, po *pebble.Options) (*pebble.DB, error) {
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	version, err := checkFormat(db)
	if err == nil && version != FormatVersion {
		err = fmt.Errorf("%w: a new store has format version %d", ErrCorrupt, version)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	return db, nil
}

// checkFormat writes this release's format version into a new database
// and returns the version a database holds.
func checkFormat(db *pebble.DB) (uint64, error) {
	v, closer, err := db.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		var b [binary.MaxVarintLen64]byte
		return FormatVersion, db.Set(formatKey, b[:binary.PutUvarint(b[:], FormatVersion)], pebble.NoSync)
	}
	if err != nil {
		return 0, fmt.Errorf("read format version: %w", err)
	}
	defer closer.Close()
	version, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) {
		return 0, fmt.Errorf("%w: format version %x", ErrCorrupt, v)
	}
	return version, nil
}

// ErrCorrupt marks a store that cannot be trusted: its metadata or format
// does not read back.
var ErrCorrupt = errors.New("store is corrupt")

// newStore wraps an open database, loading its metadata.
func newStore(root, name string, o Options, db *pebble.DB, cache *pebble.Cache, brk *breaker) (*Store, error) {
	s := &Store{root: root, name: name, opts: o, db: db, po: o.pebbleOptions(cache, brk), cache: cache, expLow: []byte{prefixExpiry}, brk: brk,
		unflushed: newUnflushed(o.flushEvery, o.ownSetKeys), filters: filters{size: o.KeyFilterSize},
		soon: dueSoon{budget: o.dueSoonSize}, closed: make(chan struct{})}
	s.refs.Store(1)
	if err := s.loadMeta(); err != nil {
		return nil, err
	}
	return s, nil
}

// loadMeta reads the metadata of the last commit and the last position
// given; a new store has neither (zero Meta, no position).
func (s *Store) loadMeta() error {
	v, closer, err := s.db.Get(metaKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read store metadata: %w", err)
	default:
		err = s.meta.UnmarshalBinary(v)
		closer.Close()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
	}
	return s.loadLastPosition()
}

// loadLastPosition reads the last position given. Records stored above
// it were ingested by a hand-off whose batch a crash lost (values.go): no
// key refers to them, and they go, with one range delete. Their
// positions are never given again, so no set of a position ever lands
// on one of them, and each position keeps one set for its single delete.
func (s *Store) loadLastPosition() error {
	v, found, err := get(s.db, positionKey, func(_ string, err error) error { return err })
	if err != nil {
		return fmt.Errorf("read the last position: %w", err)
	}
	if found {
		if s.lastPos, err = decodePosition(v); err != nil {
			return fmt.Errorf("read the last position: %w", err)
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixValue}, UpperBound: prefixEnd(prefixValue)})
	if err != nil {
		return fmt.Errorf("read the last record's position: %w", err)
	}
	var top uint64
	if it.Last() {
		top, err = decodePosition(it.Key()[1:])
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read the last record's position: %w", err)
	}
	if top > s.lastPos {
		// One batch: a flush that holds the range delete holds the new
		// last position too, so no later open gives those positions.
		b := s.db.NewBatch()
		b.DeleteRange(valueKey(s.lastPos+1), valueKey(top+1), nil)
		b.Set(positionKey, encodePosition(top), nil)
		err := b.Commit(pebble.NoSync)
		b.Close()
		if err != nil {
			return fmt.Errorf("remove the records past the last position: %w", err)
		}
		s.lastPos = top
	}
	return nil
}

// closing reports whether Close was called.
func (s *Store) closing() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// fail reports err to Fatal and returns it, for a caller that cannot go on.
func (s *Store) fail(what string, err error) error { return s.brk.fail(what, err) }

// breaker stops a database's users at its first fatal error.
type breaker struct {
	fatal  func(error)
	broken chan struct{}
	once   sync.Once
}

func newBreaker(fatal func(error)) *breaker {
	return &breaker{fatal: fatal, broken: make(chan struct{})}
}

// fail trips the breaker, reports err to Fatal and returns it.
func (b *breaker) fail(what string, err error) error {
	err = fmt.Errorf("store: %s: %w", what, err)
	b.once.Do(func() { close(b.broken) })
	b.fatal(err)
	return err
}

// errBroken answers a Sync or Close after a fatal error.
var errBroken = errors.New("store: stopped after a fatal error")

// Get returns the encoded record under key. A key the key filter has not
// seen is absent; a key no memtable can hold is looked up in the sstables
// alone (unflushed.go says why).
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	return s.read(key, &missLookup)
}

// read returns key's record: absent if the key filter has not seen it,
// else from the write buffer if it holds the key's last change, else from
// Pebble; flushed are the read options for the sstables (missLookup,
// hitLookup). The filter goes first: it has every stored key, the
// buffered ones too (Commit adds them before it appends), so a fresh key,
// most claims, skips the buffer's two maps, a cache miss each once they
// hold a few hundred thousand records (docs/PERFORMANCE.md).
//
// From Pebble it reads the record's position, then the record there. A
// commit may land between the two reads (a lookup runs beside the apply
// path, and a handed batch is committed on its own goroutine) and remove
// the record read: the key then has a new position, or none, and the read
// starts over. The same position twice with nothing there is corruption.
func (s *Store) read(key []byte, flushed *pebble.IterOptions) ([]byte, bool, error) {
	enc, _, found, err := s.readPlaced(key, flushed)
	return enc, found, err
}

// readPlaced is read, and also returns the position it read the record at
// in Pebble (0 when the record came from the buffer or is absent).
func (s *Store) readPlaced(key []byte, flushed *pebble.IterOptions) ([]byte, uint64, bool, error) {
	if !s.filters.mayHold(key) {
		return nil, 0, false, nil
	}
	var last uint64
	for range maxReadPasses {
		if enc, ok := s.buf.get(key); ok {
			return bytes.Clone(enc), 0, enc != nil, nil
		}
		pos, found, err := s.locate(key, flushed)
		if err != nil || !found {
			return nil, 0, false, err
		}
		enc, found, err := get(s.db, valueKey(pos), s.fail)
		if err != nil || found {
			return enc, pos, found, err
		}
		if pos == last {
			return nil, 0, false, s.fail("read a record", fmt.Errorf("%w: no record at position %d for key %q", ErrCorrupt, pos, key))
		}
		last = pos
	}
	return nil, 0, false, fmt.Errorf("read record %q: it moved at each of %d reads", key, maxReadPasses)
}

// maxReadPasses bounds the reads of a record that commits keep moving: a
// commit moves a key once, so a few passes at most, and more is a bug to
// see rather than a loop.
const maxReadPasses = 1000

// locate returns the position of key's record in Pebble, looked up in the
// sstables alone for a key that is in none of the memtables.
func (s *Store) locate(key []byte, flushed *pebble.IterOptions) (uint64, bool, error) {
	var v []byte
	var found bool
	var err error
	if may, forgotten := s.unflushed.mayHold(key); may {
		v, found, err = get(s.db, recordKey(key), s.fail)
	} else {
		v, found, err = s.getFlushed(recordKey(key), flushed, forgotten)
	}
	if err != nil || !found {
		return 0, false, err
	}
	pos, err := decodePosition(v)
	if err != nil {
		return 0, false, s.fail("read a record's position", err)
	}
	return pos, true, nil
}

// The sstables' read options. missLookup is for a key that is most likely
// nowhere (a claim's): the last level's Bloom filter answers the miss,
// where DB.Get would skip it and read an index and a data block.
// hitLookup is for a key that is stored (Due's): a filter cannot spare
// that read, and the last level's filters are the largest blocks to cache.
var (
	missLookup = pebble.IterOptions{OnlyReadGuaranteedDurable: true, UseL6Filters: true}
	hitLookup  = pebble.IterOptions{OnlyReadGuaranteedDurable: true}
)

// getFlushed looks key up in the sstables, skipping the memtables, with an
// iterator that sees the flushes of the first forgotten generations.
func (s *Store) getFlushed(key []byte, opts *pebble.IterOptions, forgotten uint64) ([]byte, bool, error) {
	it, err := s.iters.take(s.db, opts, forgotten)
	if err != nil {
		return nil, false, s.fail("read a record", err)
	}
	var out []byte
	found := it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key)
	if found {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, false, s.fail("read a record", err)
		}
		out = bytes.Clone(v)
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, false, s.fail("read a record", err)
	}
	s.iters.put(it)
	return out, found, nil
}

// reader is what Get needs of a database or a snapshot.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func get(r reader, key []byte, fail func(string, error) error) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fail("read a record", err)
	}
	out := bytes.Clone(v)
	if err := closer.Close(); err != nil {
		return nil, false, fail("read a record", err)
	}
	return out, true, nil
}

// Due returns at most limit records expiring at or before t, in (expiry,
// key) order. It waits for the handed batch, and drains the buffer if it
// inserts an index entry that far; otherwise Pebble holds every entry up
// to t, and the buffer can only have removed some (a lease's end moves its
// record's entry to the TTL): Due skips those, and reads the records,
// which may be newer in the buffer. A record kept as due soon (duesoon.go)
// is taken from memory, any other read. Due holds the buffer's write lock
// throughout, so no drain or hand-off adds entries to Pebble while it
// walks.
func (s *Store) Due(t int64, limit int) ([][]byte, error) {
	s.buf.wmu.Lock()
	defer s.buf.wmu.Unlock()
	if err := s.settle(); err != nil {
		return nil, err
	}
	if s.buf.insertsBy(t) {
		if err := s.drain(); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	low := s.expLow
	s.mu.Unlock()
	var out [][]byte
	first := true
	err := s.walkExpiry(low, func(at int64, key []byte) (bool, error) {
		if at <= t && s.buf.removes(at, key) {
			return true, nil
		}
		if first {
			// Every entry walked before this one the buffer removes.
			// Due runs on the committing goroutine, holding wmu: no
			// commit or drain inserts a key below it while it walks.
			s.raiseExpLow(low, expiryKey(at, key))
			first = false
		}
		if at > t || len(out) >= limit {
			return false, nil
		}
		enc, err := s.dueRecord(at, key)
		if err != nil {
			return false, err
		}
		out = append(out, enc)
		return true, nil
	})
	return out, err
}

// dueRecord reads the record an index entry (at, key) stands for: kept
// as due soon, else from the buffer or Pebble, keeping the position read
// in Pebble for the commit that changes it (duePos).
func (s *Store) dueRecord(at int64, key []byte) ([]byte, error) {
	if enc, ok := s.soon.get(key, at); ok {
		return bytes.Clone(enc), nil
	}
	enc, pos, ok, err := s.readPlaced(key, &hitLookup)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, s.fail("read the expiry index", fmt.Errorf("%w: entry for a record that is not stored", ErrCorrupt))
	}
	if pos != 0 {
		if s.duePos == nil {
			s.duePos = map[string]uint64{}
		}
		s.duePos[string(key)] = pos
	}
	return enc, nil
}

// Events returns at most limit events numbered above after, in order.
// It waits for the handed batch, which may change the feed. Where the
// write buffer prunes nothing above after, the events below the first it
// adds are the same in Pebble, so when limit of them answer, it stays: the
// leader asks for the oldest event at every tick (fsm's nextPrune), and a
// drain at each would take the batch to Pebble small, a skiplist insert
// per key (buffer.go). Otherwise it drains the buffer first. It reads
// Pebble outside the buffer's lock, so a reader never holds up a commit:
// commits meanwhile add only events numbered above any buffered, or prune,
// so its answer is the feed as of some commit since the call.
func (s *Store) Events(after uint64, limit int) ([][]byte, error) {
	before, current, err := s.feedBound(after)
	if err != nil {
		return nil, err
	}
	if current {
		out, err := s.readEvents(after, limit, before)
		if err != nil || len(out) == limit || before == math.MaxUint64 {
			return out, err
		}
	}
	if err := s.drainNow(); err != nil {
		return nil, err
	}
	return s.readEvents(after, limit, math.MaxUint64)
}

// feedBound waits for the handed batch and says whether Pebble holds the
// feed's events above after as the write buffer leaves them, below before
// (buffer.feedCurrentBelow).
func (s *Store) feedBound(after uint64) (before uint64, current bool, err error) {
	s.buf.wmu.Lock()
	defer s.buf.wmu.Unlock()
	if err := s.settle(); err != nil {
		return 0, false, err
	}
	before, current = s.buf.feedCurrentBelow(after)
	return before, current, nil
}

// readEvents reads at most limit events from Pebble numbered above after
// and below before.
func (s *Store) readEvents(after uint64, limit int, before uint64) ([][]byte, error) {
	if before <= after+1 {
		return nil, nil
	}
	upper := prefixEnd(prefixEvent)
	if before != math.MaxUint64 {
		upper = eventKey(before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(after + 1), UpperBound: upper})
	if err != nil {
		return nil, s.fail("read the feed", err)
	}
	var out [][]byte
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		out = append(out, bytes.Clone(it.Value()))
	}
	if err := it.Close(); err != nil {
		return nil, s.fail("read the feed", err)
	}
	return out, nil
}

// NextExpiry returns the earliest due time of the records stored, and
// moves expLow up to the first entry of the index in Pebble (peekExpiry),
// so the delete markers below it are stepped over once. A record whose
// last change is in the write buffer counts with its due time there, not
// with its entry in Pebble, which the buffer may delete or keep.
//
// A drain while it walks (a Sync, a View, a reader of the feed, a handed
// batch) moves buffered records into Pebble behind the walk's iterator
// and out of the buffer before nextDue reads it, so a walk that a map's
// clear overlapped (buffer.clears) is retried, a few times at most: a
// clear is rare next to a walk. Past them the answer may be late by one
// tick, never wrong for Due, which reads the store itself.
func (s *Store) NextExpiry() (next int64, found bool, err error) {
	s.peekMu.Lock()
	defer s.peekMu.Unlock()
	for range 3 {
		clears := s.buf.clears.Load()
		next, found, err = s.peekExpiry()
		if err != nil || clears%2 == 0 && s.buf.clears.Load() == clears {
			break
		}
	}
	return next, found, err
}

// peekExpiry is one walk of NextExpiry; the caller holds peekMu.
func (s *Store) peekExpiry() (int64, bool, error) {
	low := s.startPeek()
	var next int64
	var found bool
	var first []byte
	err := s.walkExpiry(low, func(at int64, key []byte) (bool, error) {
		if first == nil {
			first = expiryKey(at, key)
		}
		if s.buf.has(key) {
			return true, nil
		}
		next, found = at, true
		return false, nil
	})
	s.endPeek(low, first)
	if at, ok := s.buf.nextDue(); ok && (!found || at < next) {
		next, found = at, true
	}
	return next, found, err
}

// startPeek reads expLow and starts recording the lowest expiry key that
// commits insert meanwhile.
func (s *Store) startPeek() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peeking, s.insertedLow = true, nil
	return s.expLow
}

// endPeek moves expLow from low up to first, the first entry a walk from
// low found, unless a commit lowered it meanwhile. NextExpiry runs beside
// the commits (the leader's ticker), so a commit may have inserted a key
// between low and first that the walk did not see: expLow goes no higher
// than the lowest key inserted since startPeek. With nothing found, it
// stays.
func (s *Store) endPeek(low, first []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inserted := s.insertedLow
	s.peeking, s.insertedLow = false, nil
	if first == nil || !bytes.Equal(s.expLow, low) {
		return
	}
	s.expLow = lowerKey(lowerKey(first, inserted), s.unindexedLowLocked())
}

// unindexedLowLocked is the lowest expiry key the write buffer or its
// handed batch inserts; the caller holds mu.
func (s *Store) unindexedLowLocked() []byte { return lowerKey(s.bufferedLow, s.handedLow) }

// lowerKey returns the lower of two keys, nil standing for none.
func lowerKey(a, b []byte) []byte {
	if a == nil || b != nil && bytes.Compare(b, a) < 0 {
		return b
	}
	return a
}

// noteInsertedLocked records that key, an expiry key, is now in Pebble for
// a NextExpiry walking it meanwhile; the caller holds mu.
func (s *Store) noteInsertedLocked(key []byte) {
	if s.peeking {
		s.insertedLow = lowerKey(s.insertedLow, key)
	}
}

// walkExpiry calls fn for each expiry index entry from low on, until fn
// says stop.
func (s *Store) walkExpiry(low []byte, fn func(at int64, key []byte) (bool, error)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: low, UpperBound: prefixEnd(prefixExpiry)})
	if err != nil {
		return s.fail("read the expiry index", err)
	}
	for it.First(); it.Valid(); it.Next() {
		at, key, err := parseExpiryKey(it.Key())
		if err != nil {
			it.Close()
			return s.fail("read the expiry index", fmt.Errorf("%w: %w", ErrCorrupt, err))
		}
		more, err := fn(at, key)
		if err != nil || !more {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return s.fail("read the expiry index", err)
	}
	return nil
}

// raiseExpLow moves expLow from low up to first (the first entry at or
// after low that Due does not skip as removed by the buffer), no higher
// than the lowest entry the buffer inserts. The caller is the committing
// goroutine, so no commit ran between its read of expLow and now.
func (s *Store) raiseExpLow(low, first []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Equal(s.expLow, low) {
		s.expLow = lowerKey(bytes.Clone(first), s.unindexedLowLocked())
	}
}

// Meta returns the metadata of the last commit.
func (s *Store) Meta() fsm.Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta
}

// Usages reads every tenant's usage.
func (s *Store) Usages() (map[string]fsm.Usage, error) {
	if err := s.drainNow(); err != nil {
		return nil, err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixUsage}, UpperBound: prefixEnd(prefixUsage)})
	if err != nil {
		return nil, fmt.Errorf("read tenant usage: %w", err)
	}
	defer it.Close()
	out := map[string]fsm.Usage{}
	for it.First(); it.Valid(); it.Next() {
		u, err := decodeUsage(it.Value())
		if err != nil {
			return nil, fmt.Errorf("%w: usage of tenant %q", ErrCorrupt, it.Key()[1:])
		}
		out[string(it.Key()[1:])] = u
	}
	return out, it.Error()
}

// Commit adds one group's changes and metadata to the write buffer
// (buffer.go), which reaches Pebble as one batch, without syncing
// (DESIGN.md: the Raft log is the write-ahead log). A batch is applied to
// the memtable whole, and memtables reach the disk in order, so after a
// crash the store holds some prefix of its commits, never a torn one;
// Sync makes all of them durable.
func (s *Store) Commit(c *fsm.Changes) error {
	rebuildFilter := s.filters.add(c.Records)
	s.buf.wmu.Lock()
	defer s.buf.wmu.Unlock()
	at, err := s.place(c.Records)
	if err != nil {
		return err
	}
	lowest := s.buf.append(s.db, c, at, s.lastPos, s.opts.drainEvery)
	s.soon.note(c.Records, at, c.Meta.Now)
	if s.duePos != nil {
		s.duePos = nil // dropped, not cleared: clear costs what the map once held, at every commit
	}
	s.mu.Lock()
	s.meta = c.Meta
	if lowest != nil {
		s.expLow = lowerKey(s.expLow, lowest)
		s.noteInsertedLocked(lowest)
		s.bufferedLow = lowerKey(s.bufferedLow, lowest)
	}
	s.mu.Unlock()
	if s.buf.full(s.opts.drainEvery) {
		if err := s.handOff(); err != nil {
			return err
		}
	}
	// A flush that starts before the handed batch is in would not hold
	// it: rotate waits for a later commit.
	if !s.buf.handing() {
		if err := s.unflushed.rotate(s.db.AsyncFlush); err != nil {
			return s.fail("flush", err)
		}
	}
	if rebuildFilter {
		s.startFilterBuild()
	}
	return nil
}

// placement is where a change's records are: old the position of the
// record it replaces (when one is stored), new the position it writes its
// record at (when it stores one).
type placement struct{ old, new uint64 }

// place gives each change's new record the next position and finds the
// position of the record it replaces; the caller holds wmu. Each key
// comes at most once in a commit (fsm.Changes), so the record a change
// replaces was stored by an earlier commit.
func (s *Store) place(changes []fsm.RecordChange) ([]placement, error) {
	out := make([]placement, len(changes))
	for i, rc := range changes {
		if rc.HadOld {
			old, err := s.positionOf(rc.Key)
			if err != nil {
				return nil, err
			}
			out[i].old = old
		}
		if rc.New != nil {
			s.lastPos++
			out[i].new = s.lastPos
		}
	}
	return out, nil
}

// positionOf returns the position of key's stored record: the buffer's,
// the one Due read it at since the last commit, a record kept as due soon
// (a lease's end), or Pebble's; the caller holds wmu, so no commit changes
// it meanwhile.
func (s *Store) positionOf(key []byte) (uint64, error) {
	if b, ok := s.buf.last(key); ok {
		if b.enc == nil {
			return 0, s.fail("commit", fmt.Errorf("%w: a change replaces a record the buffer deleted", ErrCorrupt))
		}
		return b.pos, nil
	}
	if pos, ok := s.duePos[string(key)]; ok {
		return pos, nil
	}
	if pos, ok := s.soon.position(key); ok {
		return pos, nil
	}
	pos, found, err := s.locate(key, &hitLookup)
	if err == nil && !found {
		err = s.fail("commit", fmt.Errorf("%w: a change replaces a record that is not stored", ErrCorrupt))
	}
	return pos, err
}

// writeRecords adds the record changes, their positions and their expiry
// index entries to b, their records to vals (written apart, values.go),
// and returns the lowest expiry key it inserts.
//
// A record's value and its expiry index entry are removed with a single
// delete: each is set only where none is (a new position; a new record,
// or one whose due time moves) and deleted only where one is, so each set
// meets exactly one delete, the one use Pebble allows (a second set would
// come back; PossibleAPIMisuse stops the node if a compaction ever meets
// one). A single delete and its set cancel out wherever they meet, in the
// flush of the batch holding both included: a claim's record and lease
// entry, replaced by its completion's milliseconds later. A plain delete
// left a marker per completion there, carried down every level: one store
// at a cluster's pace spent 36 µs of CPU per claim+complete with them and
// 29 without (docs/PERFORMANCE.md). A record's key is set again and again
// (claim, complete) and keeps the plain delete.
func writeRecords(b *pebble.Batch, vals *freshValues, scratch *[]byte, changes []fsm.RecordChange, at []placement) []byte {
	k := (*scratch)[:0] // the batch copies each key: one buffer serves them all
	var pos [8]byte
	var lowestAt int64
	var lowestKey []byte
	inserts := false
	for i, rc := range changes {
		sameExpiry := keepsExpiry(rc)
		if rc.HadOld {
			if !vals.cancel(at[i].old) {
				k = appendValueKey(k[:0], at[i].old)
				b.SingleDelete(k, nil)
			}
			if !sameExpiry {
				k = appendExpiryKey(k[:0], rc.OldExpiresAt, rc.Key)
				b.SingleDelete(k, nil)
			}
		}
		k = appendRecordKey(k[:0], rc.Key)
		if rc.New == nil {
			b.Delete(k, nil)
			continue
		}
		vals.add(at[i].new, rc.New)
		binary.BigEndian.PutUint64(pos[:], at[i].new)
		b.Set(k, pos[:], nil)
		if !sameExpiry {
			k = appendExpiryKey(k[:0], rc.NewExpiresAt, rc.Key)
			b.Set(k, nil, nil)
			if !inserts || rc.NewExpiresAt < lowestAt || rc.NewExpiresAt == lowestAt && bytes.Compare(rc.Key, lowestKey) < 0 {
				inserts, lowestAt, lowestKey = true, rc.NewExpiresAt, rc.Key
			}
		}
	}
	*scratch = k
	if !inserts {
		return nil
	}
	return expiryKey(lowestAt, lowestKey)
}

// keepsExpiry reports whether a change leaves its record's expiry index
// entry as it is: a record rewritten with the same due time.
func keepsExpiry(rc fsm.RecordChange) bool {
	return rc.HadOld && rc.New != nil && rc.OldExpiresAt == rc.NewExpiresAt
}

// Sync flushes the memtables, making every commit so far durable.
// A store that was replaced and closed meanwhile has nothing to sync: the
// store that replaced it was flushed when it was built.
func (s *Store) Sync() error {
	if !s.acquire() {
		return nil
	}
	defer s.release()
	if err := s.drainNow(); err != nil {
		return err
	}
	return flush(s.db, s.brk)
}

// flush waits for a flush of db's memtables, unless brk trips first.
func flush(db *pebble.DB, brk *breaker) error {
	select {
	case <-brk.broken:
		return errBroken
	default:
	}
	done, err := db.AsyncFlush()
	if err != nil {
		return brk.fail("flush", err)
	}
	select {
	case <-done:
		return nil
	case <-brk.broken:
		return errBroken
	}
}

// Close flushes the store, so that a clean restart replays nothing, and
// releases it; the database closes once its last view is closed.
func (s *Store) Close() error {
	// Under wmu: a commit starting a filter build holds it, so no build
	// starts once closed is closed, and Wait waits for every one.
	s.buf.wmu.Lock()
	s.closeOnce.Do(func() { close(s.closed) })
	s.buf.wmu.Unlock()
	s.builds.Wait()
	err := s.Sync()
	s.release()
	return err
}

// acquire takes a reference unless the store is closed already.
func (s *Store) acquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops one reference; the last closes the database and removes
// the store's dir if CURRENT no longer names it (a store replaced by a
// restored snapshot).
func (s *Store) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.iters.close()
	s.db.Close()
	s.cache.Unref()
	if cur, err := readCurrent(s.opts.FS, s.root); err == nil && cur != s.name {
		s.opts.FS.RemoveAll(s.opts.FS.PathJoin(s.root, s.name))
	}
}

// DiskUsage returns the bytes the store's files take.
func (s *Store) DiskUsage() uint64 { return s.db.Metrics().DiskSpaceUsage() }

// Metrics returns Pebble's metrics.
// Metrics returns Pebble's metrics, or nil for a store closed already.
func (s *Store) Metrics() *pebble.Metrics {
	if !s.acquire() {
		return nil
	}
	defer s.release()
	return s.db.Metrics()
}

// quietLogger drops Pebble's log lines but its fatal ones, which go to
// Options.Fatal (exit code 3 on a node) like every other store fault.
type quietLogger struct{ fatal func(error) }

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (l quietLogger) Fatalf(format string, args ...interface{}) {
	l.fatal(fmt.Errorf("store: pebble: "+format, args...))
}
