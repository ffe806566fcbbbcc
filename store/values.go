package store

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// freshValues are the records a buffer writes at the positions it gave,
// in position order, kept out of its Pebble batch: a hand-off writes them
// into a table of their own and ingests it before it commits the batch.
// Their positions lie above every key the store holds (keys.go), so Pebble
// puts the table in the bottom level at once, and no flush or compaction
// rewrites the records until they are removed. Through the memtables they
// were, in a two-minute run of the benchmark's claim+complete load, most of
// what the store's flushes and compactions wrote (docs/PERFORMANCE.md).
//
// A record the buffer writes and then replaces or removes is cancelled:
// neither its value nor its single delete is written. A drain (a small
// batch, for a reader that needs Pebble to hold every commit) writes the
// values into its batch instead, as before.
type freshValues struct {
	pos   []uint64 // ascending: positions only grow
	encs  [][]byte // the records at pos, nil where cancelled
	bytes int      // what the live ones add to a batch, about
}

// valueOverhead is about what a value's key and the batch's framing add.
const valueOverhead = 12

// add records enc at pos, above every position added before.
func (v *freshValues) add(pos uint64, enc []byte) {
	v.pos = append(v.pos, pos)
	v.encs = append(v.encs, enc)
	v.bytes += len(enc) + valueOverhead
}

// cancel drops the record at pos if this buffer wrote it, and reports
// whether it did: a record the buffer did not write is in Pebble (or in
// a handed batch), and the caller single-deletes it there.
func (v *freshValues) cancel(pos uint64) bool {
	i, found := slices.BinarySearch(v.pos, pos)
	if !found {
		return false
	}
	if v.encs[i] != nil {
		v.bytes -= len(v.encs[i]) + valueOverhead
		v.encs[i] = nil
	}
	return true
}

// writeTo adds the live records to b.
func (v *freshValues) writeTo(b *pebble.Batch) {
	for i, enc := range v.encs {
		if enc != nil {
			b.Set(valueKey(v.pos[i]), enc, nil)
		}
	}
}

// ingestValues writes the live records into tables beside the store and
// ingests them. It runs before the batch that refers to them is
// committed: a crash between the two leaves records above the last
// position the store holds durably, which no key refers to and Open
// removes (loadLastPosition); never a key whose record is missing.
func (s *Store) ingestValues(v *freshValues) error {
	files := tableFiles{fs: s.opts.FS, root: s.root, name: s.name + "-values", db: s.db, po: s.po}
	var run tableRun
	for i, enc := range v.encs {
		if enc == nil {
			continue
		}
		if err := files.set(&run, valueKey(v.pos[i]), enc); err != nil {
			run.close()
			files.remove()
			return err
		}
	}
	if err := files.ingest(&run); err != nil {
		files.remove()
		return fmt.Errorf("ingest the buffered records: %w", err)
	}
	return nil
}
