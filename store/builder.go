package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/idemnode/idemnode/fsm"
)

// builder fills a new store in the dir after the current one, straight
// from a snapshot stream (nothing is staged in a file first), in batches
// of about batchBytes without the WAL; Finish flushes it to disk and
// Install points CURRENT at it.
type builder struct {
	parent *Store
	name   string
	db     *pebble.DB
	cache  *pebble.Cache
	batch  *pebble.Batch
	brk    *breaker
}

const batchBytes = 4 << 20

// NewBuilder starts a fresh store beside this one.
func (s *Store) NewBuilder() (fsm.Builder, error) {
	name := nextName(s.name)
	fs := s.opts.FS
	if err := fs.RemoveAll(fs.PathJoin(s.root, name)); err != nil {
		return nil, fmt.Errorf("clear %s: %w", name, err)
	}
	cache := pebble.NewCache(s.opts.CacheSize)
	brk := newBreaker(s.opts.Fatal)
	db, err := openDB(fs.PathJoin(s.root, name), s.opts, cache, brk)
	if err != nil {
		cache.Unref()
		return nil, err
	}
	return &builder{parent: s, name: name, db: db, cache: cache, batch: db.NewBatch(), brk: brk}, nil
}

func (b *builder) Has(key []byte) (bool, error) {
	if _, closer, err := b.batch.Get(recordKey(key)); err == nil {
		closer.Close()
		return true, nil
	}
	_, ok, err := get(b.db, recordKey(key), func(what string, err error) error { return fmt.Errorf("%s: %w", what, err) })
	return ok, err
}

func (b *builder) Put(key, enc []byte, expiresAt int64) error {
	b.batch.Set(recordKey(key), enc, nil)
	b.batch.Set(expiryKey(expiresAt, key), nil, nil)
	if b.batch.Len() < batchBytes {
		return nil
	}
	return b.flushBatch()
}

func (b *builder) flushBatch() error {
	if err := b.batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("write restored records: %w", err)
	}
	b.batch.Close()
	b.batch = b.db.NewBatch()
	return nil
}

// Finish writes the usage and metadata and flushes everything to disk.
func (b *builder) Finish(m fsm.Meta, usage map[string]fsm.Usage) error {
	for tenant, u := range usage {
		b.batch.Set(usageKey(tenant), encodeUsage(u), nil)
	}
	enc, _ := m.MarshalBinary()
	b.batch.Set(metaKey, enc, nil)
	if err := b.flushBatch(); err != nil {
		return err
	}
	if err := flush(b.db, b.brk); err != nil {
		return fmt.Errorf("flush restored store: %w", err)
	}
	return nil
}

// Install points CURRENT at the new store and opens it; the parent stays
// open for its readers until closed, and its dir goes with its last reader.
func (b *builder) Install() (fsm.Store, error) {
	if err := writeCurrent(b.parent.opts.FS, b.parent.root, b.name); err != nil {
		return nil, err
	}
	s, err := newStore(b.parent.root, b.name, b.parent.opts, b.db, b.cache, b.brk)
	if err != nil {
		return nil, err
	}
	b.db, b.batch = nil, nil
	return s, nil
}

// Abort closes and removes the store being built.
func (b *builder) Abort() {
	if b.db == nil {
		return
	}
	b.batch.Close()
	b.db.Close()
	b.cache.Unref()
	fs := b.parent.opts.FS
	fs.RemoveAll(fs.PathJoin(b.parent.root, b.name))
	b.db = nil
}
