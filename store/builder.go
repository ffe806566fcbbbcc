package store

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/idemnode/idemnode/fsm"
)

// builder fills a new store in the dir after the current one, straight
// from a snapshot stream (nothing is staged in a file first); Finish
// flushes it to disk and Install points CURRENT at it.
//
// A stream in key order (versions 1 and 3) has its records written as
// sorted tables of about tableBytes and ingested, which puts them in the
// bottom level at once: the record keys in one run of tables, the records
// at their positions (numbered in the stream's order) in another. Written
// through memtables instead, a 30 M-record restore left 1 389 files in
// level 0, and lookups and restarts paid for them until compactions caught
// up (docs/PERFORMANCE.md). The expiry index,
// in another order, goes through batches of about batchBytes, without the
// WAL. A record out of key order (a version 2 stream) sends what was
// written so far in, and the rest goes through batches too.
type builder struct {
	parent *Store
	name   string
	db     *pebble.DB
	po     *pebble.Options
	cache  *pebble.Cache
	batch  *pebble.Batch
	brk    *breaker

	// sorted says records have come in key order so far; lastKey is the
	// last one; keys and records are the runs of tables being written
	// (the record keys, the records at their positions) into files.
	sorted        bool
	lastKey       []byte
	files         tableFiles
	keys, records tableRun
	// lastPos is the position of the last record put.
	lastPos uint64
}

const batchBytes = 4 << 20

// NewBuilder starts a fresh store beside this one.
func (s *Store) NewBuilder() (fsm.Builder, error) {
	name := nextName(s.name)
	fs := s.opts.FS
	if err := fs.RemoveAll(fs.PathJoin(s.root, name)); err != nil {
		return nil, fmt.Errorf("clear %s: %w", name, err)
	}
	// The new store shares the block cache, so that a node installing a
	// snapshot holds one cache, not two (Options.MemoryBound): the old
	// store's blocks give way as the new one's come in.
	cache := s.cache
	cache.Ref()
	brk := newBreaker(s.opts.Fatal)
	po := s.opts.pebbleOptions(cache, brk)
	db, err := openNewDB(fs.PathJoin(s.root, name), po)
	if err != nil {
		cache.Unref()
		return nil, err
	}
	return &builder{parent: s, name: name, db: db, po: po, cache: cache, batch: db.NewBatch(), brk: brk, sorted: true,
		files: tableFiles{fs: fs, root: s.root, name: name, db: db, po: po}}, nil
}

// Has reports whether key was put. A key at or below the last one written
// to a table may be in a table not yet ingested: the tables go in first.
func (b *builder) Has(key []byte) (bool, error) {
	rk := recordKey(key)
	if b.sorted && b.lastKey != nil && bytes.Compare(rk, b.lastKey) <= 0 {
		if err := b.unsort(); err != nil {
			return false, err
		}
	}
	// The batch is not indexed: write it first, so the lookup sees it.
	if b.batch.Count() > 0 {
		if err := b.flushBatch(); err != nil {
			return false, err
		}
	}
	_, ok, err := get(b.db, rk, func(what string, err error) error { return fmt.Errorf("%s: %w", what, err) })
	return ok, err
}

func (b *builder) Put(key, enc []byte, expiresAt int64) error {
	rk := recordKey(key)
	b.lastPos++
	pos, vk := encodePosition(b.lastPos), valueKey(b.lastPos)
	if b.sorted && (b.lastKey == nil || bytes.Compare(rk, b.lastKey) > 0) {
		b.lastKey = append(b.lastKey[:0], rk...)
		if err := b.files.set(&b.keys, rk, pos); err != nil {
			return err
		}
		if err := b.files.set(&b.records, vk, enc); err != nil {
			return err
		}
	} else {
		if err := b.unsort(); err != nil {
			return err
		}
		b.batch.Set(rk, pos, nil)
		b.batch.Set(vk, enc, nil)
	}
	b.batch.Set(expiryKey(expiresAt, key), nil, nil)
	if b.batch.Len() < batchBytes {
		return nil
	}
	return b.flushBatch()
}

// PutEvent adds an event of the feed; events go through batches.
func (b *builder) PutEvent(seq uint64, enc []byte) error {
	b.batch.Set(eventKey(seq), enc, nil)
	if b.batch.Len() < batchBytes {
		return nil
	}
	return b.flushBatch()
}

// ingest moves the tables written so far into the database.
func (b *builder) ingest() error {
	if err := b.files.ingest(&b.keys, &b.records); err != nil {
		return fmt.Errorf("restore records: %w", err)
	}
	return nil
}

// unsort ingests what was written in order and sends the rest through batches.
func (b *builder) unsort() error {
	if !b.sorted {
		return nil
	}
	b.sorted = false
	return b.ingest()
}

func (b *builder) flushBatch() error {
	if err := b.batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("write restored records: %w", err)
	}
	b.batch.Close()
	b.batch = b.db.NewBatch()
	return nil
}

// Finish ingests the tables, writes the usage and metadata and flushes
// everything to disk.
func (b *builder) Finish(m fsm.Meta, usage map[string]fsm.Usage) error {
	if err := b.ingest(); err != nil {
		return err
	}
	for tenant, u := range usage {
		b.batch.Set(usageKey(tenant), encodeUsage(u), nil)
	}
	enc, _ := m.MarshalBinary()
	b.batch.Set(metaKey, enc, nil)
	b.batch.Set(positionKey, encodePosition(b.lastPos), nil)
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
//
// On an error the old store is still current and Abort may remove the new
// one; a failure after CURRENT was renamed (syncing the dir) leaves the new
// store current, so it is returned as installed.
func (b *builder) Install() (fsm.Store, error) {
	s, err := newStore(b.parent.root, b.name, b.parent.opts, b.db, b.cache, b.brk)
	if err != nil {
		return nil, err
	}
	fs := b.parent.opts.FS
	if err := writeCurrent(fs, b.parent.root, b.name); err != nil {
		if cur, rerr := readCurrent(fs, b.parent.root); rerr != nil || cur != b.name {
			return nil, err
		}
	}
	b.db, b.batch = nil, nil
	s.startFilterBuild()
	return s, nil
}

// Abort closes and removes the store being built.
func (b *builder) Abort() {
	if b.db == nil {
		return
	}
	b.keys.close()
	b.records.close()
	b.files.remove()
	b.batch.Close()
	b.db.Close()
	b.cache.Unref()
	fs := b.parent.opts.FS
	fs.RemoveAll(fs.PathJoin(b.parent.root, b.name))
	b.db = nil
}
