package store

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// iterCache keeps the iterators of lookups in the sstables alone between
// lookups: opening and closing one was a third of the cost of looking up
// a fresh key (docs/PERFORMANCE.md), and a claim of a fresh key looks one
// up on every node.
//
// Such an iterator sees the sstables as they were when it was opened and
// never the memtables. A key that unflushed says is in no memtable was
// last written in a generation forgotten before the lookup, that is after
// the flush holding it was done. So an iterator serves a lookup if it was
// opened after that many generations were forgotten, and is closed once a
// later one is; the count is read before the iterator is opened, so an
// iterator is never credited with a flush it may not see. A kept iterator
// pins the sstables and the memtables of the moment it opened (Pebble's
// read state), so a flushed memtable may stay in memory until the first
// lookup after its generation is forgotten: under load within one commit,
// on an idle node until the next request.
type iterCache struct {
	mu   sync.Mutex
	free []*cachedIter
}

type cachedIter struct {
	*pebble.Iterator
	opts      *pebble.IterOptions
	forgotten uint64
}

// maxCachedIters bounds the iterators kept: one per concurrent lookup.
const maxCachedIters = 4

// take returns an iterator with opts that sees the flushes of the first
// forgotten generations, reusing one when it can.
func (c *iterCache) take(db *pebble.DB, opts *pebble.IterOptions, forgotten uint64) (*cachedIter, error) {
	c.mu.Lock()
	var stale []*cachedIter
	var found *cachedIter
	kept := c.free[:0]
	for _, it := range c.free {
		switch {
		case it.forgotten < forgotten:
			stale = append(stale, it)
		case found == nil && it.opts == opts:
			found = it
		default:
			kept = append(kept, it)
		}
	}
	c.free = kept
	c.mu.Unlock()
	for _, it := range stale {
		it.Close()
	}
	if found != nil {
		return found, nil
	}
	it, err := db.NewIter(opts)
	if err != nil {
		return nil, err
	}
	return &cachedIter{Iterator: it, opts: opts, forgotten: forgotten}, nil
}

// put returns it for a later lookup, or closes it when enough are kept.
func (c *iterCache) put(it *cachedIter) {
	c.mu.Lock()
	if len(c.free) < maxCachedIters {
		c.free = append(c.free, it)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	it.Close()
}

// close closes every kept iterator, before the database closes.
func (c *iterCache) close() {
	c.mu.Lock()
	free := c.free
	c.free = nil
	c.mu.Unlock()
	for _, it := range free {
		it.Close()
	}
}
