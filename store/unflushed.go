package store

import (
	"hash/maphash"
	"iter"
	"sync"
)

// unflushed tracks which record keys may still sit in a memtable, so a
// lookup of any other key reads only the sstables, where Bloom filters
// answer a miss in a few probes. Pebble has no filter over its memtables:
// a Get of a fresh key (most claims) walks every memtable's skiplist from
// the top and misses the CPU cache at each step, which made it the largest
// cost of a claim (docs/PERFORMANCE.md).
//
// Keys are tracked by hash in two generations. Every commit adds its keys
// to cur before it writes them. Once cur has seen limit bytes and no flush
// is running, cur becomes prev and a flush of every memtable starts; when
// that flush completes, everything in prev is in sstables and prev is
// dropped. So every key written and not yet flushed is in cur or prev, and
// a hash collision only costs a full lookup. A new store trusts nothing
// until its first flush completes (all).
//
// A generation is a few sets of hashes, one per large batch: the hand-off
// hashes a batch's hundred thousand keys on its own goroutine, outside the
// lock, and adds the set in one step, where inserting them one by one held
// the apply path, and every lookup, for some 20 ms (docs/PERFORMANCE.md).
// Smaller batches go into the generation's first set.
type unflushed struct {
	seed       maphash.Seed
	limit      int
	ownSetKeys int

	mu        sync.Mutex
	cur, prev generation
	curBytes  int
	all       bool // every key may be unflushed (cur's generation)
	prevAll   bool // every key may be unflushed (prev's generation)
	flushing  <-chan struct{}
	// forgotten counts the generations dropped after their flush.
	forgotten uint64
}

// generation is the hashes of the keys written between two flushes' starts.
type generation []map[uint64]struct{}

// has reports whether a key of hash h is in g.
func (g generation) has(h uint64) bool {
	for _, set := range g {
		if _, ok := set[h]; ok {
			return true
		}
	}
	return false
}

// defaultOwnSetKeys is the count of keys from which a batch's hashes make a
// set of their own: few enough sets that a lookup stays cheap (a
// generation holds limit bytes, a few hundred bytes a key), and a set
// large enough that inserting it under the lock would stall the readers.
const defaultOwnSetKeys = 8192

// newUnflushed tracks generations of limit bytes; batches of ownSetKeys
// keys or more get a set of their own.
func newUnflushed(limit, ownSetKeys int) *unflushed {
	return &unflushed{seed: maphash.MakeSeed(), limit: limit, ownSetKeys: ownSetKeys, all: true}
}

// add records n keys as about to be written, in a batch of bytes.
func (u *unflushed) add(keys iter.Seq[string], n, bytes int) {
	if n >= u.ownSetKeys {
		set := make(map[uint64]struct{}, n)
		for k := range keys {
			set[maphash.String(u.seed, k)] = struct{}{}
		}
		u.mu.Lock()
		u.cur = append(u.cur, set)
		u.curBytes += bytes
		u.mu.Unlock()
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.cur) == 0 {
		u.cur = generation{{}}
	}
	for k := range keys {
		u.cur[0][maphash.String(u.seed, k)] = struct{}{}
	}
	u.curBytes += bytes
}

// mayHold reports whether key may be in a memtable, and the number of
// generations forgotten so far: a key in no memtable is in an sstable that
// a flush made before the last of them was forgotten.
func (u *unflushed) mayHold(key []byte) (bool, uint64) {
	h := maphash.Bytes(u.seed, key)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reapLocked()
	if u.all || u.prevAll {
		return true, u.forgotten
	}
	return u.cur.has(h) || u.prev.has(h), u.forgotten
}

// rotate starts a new generation when cur is full (or the store is new)
// and no flush is running; flush starts the flush of every memtable and
// returns a channel closed when it is done. Only the committing goroutine
// calls rotate, after a commit, so nothing is written between the flush's
// start and the swap; and never while a handed batch is in flight, whose
// keys the hand-off adds before it commits the batch: a flush started
// between the two would not hold the batch, and forget its keys. The
// flush starts outside mu: it may wait out a write stall, and readers
// must not wait with it.
func (u *unflushed) rotate(flush func() (<-chan struct{}, error)) error {
	u.mu.Lock()
	u.reapLocked()
	due := u.flushing == nil && (u.all || u.curBytes >= u.limit)
	u.mu.Unlock()
	if !due {
		return nil
	}
	done, err := flush()
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.prev, u.prevAll = u.cur, u.all
	u.cur, u.curBytes, u.all = nil, 0, false
	u.flushing = done
	return nil
}

// reapLocked drops prev once its flush is done.
func (u *unflushed) reapLocked() {
	if u.flushing == nil {
		return
	}
	select {
	case <-u.flushing:
		u.prev, u.prevAll, u.flushing = nil, false, nil
		u.forgotten++
	default:
	}
}
