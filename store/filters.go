package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/idemnode/idemnode/fsm"
)

// filters holds the store's key filter (keyfilter.go): the one lookups
// ask, and while a rebuild runs, the next one. A filter keeps the keys of
// records deleted since it was built, so it fills up as records come and
// go; a rebuild starts from the keys stored now. It reads them from a
// Pebble snapshot, in the background, while every commit adds its keys to
// both filters: a key is in the next filter if it was stored when the
// snapshot was taken or written after. Until the first build completes
// (a store just opened), every lookup goes to Pebble.
type filters struct {
	size int64 // bytes of one filter; 0: no filter

	cur atomic.Pointer[keyFilter]

	// mu guards next and rebuildAt. Commits add under it, so the swap of
	// next for cur cannot fall between a commit's adds to the two.
	mu   sync.Mutex
	next *keyFilter
	// rebuildAt is the count of cur's bits set that starts a rebuild.
	rebuildAt int64
	// built counts the filters built, the first included.
	built atomic.Int64
}

// The fill (fraction of bits set) that starts a rebuild: at least
// minRebuildFill, where about 1 in 60 lookups of a fresh key reaches
// Pebble, and well past the fill a rebuild left (rebuildGrowth), so that a
// filter holding more keys than it was sized for is not rebuilt over and
// over for little gain.
const (
	minRebuildFill = 0.5
	rebuildGrowth  = 1.15
)

// mayHold is false only for a key no record is stored under.
func (fs *filters) mayHold(key []byte) bool {
	f := fs.cur.Load()
	return f == nil || f.mayHold(key)
}

// add puts the changes' keys in the filters, before they are written. It
// reports whether cur has filled up and no rebuild runs: the caller then
// starts one (startFilterBuild).
func (fs *filters) add(changes []fsm.RecordChange) (rebuild bool) {
	if fs.size == 0 {
		return false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	cur := fs.cur.Load()
	for _, rc := range changes {
		if rc.New == nil {
			continue // a deletion: the key may stay in the filter
		}
		if cur != nil {
			cur.add(rc.Key)
		}
		if fs.next != nil {
			fs.next.add(rc.Key)
		}
	}
	return fs.next == nil && cur != nil && cur.set.Load() > fs.rebuildAt
}

// begin registers a new filter as next, which from now on every add
// fills; nil if filters are off or a build runs already.
func (fs *filters) begin() *keyFilter {
	if fs.size == 0 {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.next != nil {
		return nil
	}
	fs.next = newKeyFilter(fs.size)
	return fs.next
}

// finish makes f, built, the filter lookups ask.
func (fs *filters) finish(f *keyFilter) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.next != f {
		return
	}
	fs.cur.Store(f)
	fs.next = nil
	fs.built.Add(1)
	bits := float64(len(f.words) * 64)
	fill := min(max(minRebuildFill, f.fill()*rebuildGrowth), (1+f.fill())/2)
	fs.rebuildAt = int64(fill * bits)
}

// abandon drops next, unbuilt (the store is closing, or the build failed).
func (fs *filters) abandon(f *keyFilter) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.next == f {
		fs.next = nil
	}
}

// startFilterBuild starts building a filter of the keys stored now, in the
// background. The caller is the committing goroutine, holding the write
// buffer's lock, or Open or Install once the store is current, before any
// commit: nothing but a handed batch is written between registering the
// filter and taking the snapshot, so every key is in one or the other, or
// in the buffer.
// A closed store starts none (Close waits for those started).
func (s *Store) startFilterBuild() {
	if s.closing() {
		return
	}
	f := s.filters.begin()
	if f == nil {
		return
	}
	if !s.acquire() {
		s.filters.abandon(f)
		return
	}
	// The buffered records first: a handed batch may reach Pebble and
	// leave the buffer meanwhile, and is then in the snapshot.
	s.buf.addKeys(f)
	snap := s.db.NewSnapshot()
	s.builds.Add(1)
	go func() {
		defer s.builds.Done()
		defer s.release()
		defer snap.Close()
		if err := s.addStoredKeys(snap, f); err != nil {
			s.filters.abandon(f)
			if !errors.Is(err, errClosing) {
				s.fail("build the key filter", err)
			}
			return
		}
		s.filters.finish(f)
	}()
}

// errClosing ends a filter build when the store closes.
var errClosing = errors.New("store is closing")

// addStoredKeys adds to f the key of every record snap holds, read from
// the expiry index (one entry per record, and nothing but its key and due
// time, so the scan reads no record).
func (s *Store) addStoredKeys(snap *pebble.Snapshot, f *keyFilter) error {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: prefixEnd(prefixExpiry)})
	if err != nil {
		return err
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		_, key, err := parseExpiryKey(it.Key())
		if err != nil {
			it.Close()
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		f.add(key)
		if n++; n%4096 == 0 && s.closing() {
			it.Close()
			return errClosing
		}
	}
	return it.Close()
}

// KeyFilter returns the fill of the key filter lookups ask (the fraction
// of its bits set; 0 while none is built) and the filters built so far.
func (s *Store) KeyFilter() (fill float64, built int64) {
	if f := s.filters.cur.Load(); f != nil {
		fill = f.fill()
	}
	return fill, s.filters.built.Load()
}
