package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestLeaseEntriesLeaveNoDeleteMarker: a claim's expiry index entry (its
// lease) is replaced by its completion's (its TTL) a few milliseconds
// later, mostly in the same batch. Removed with a single delete, the entry
// and its removal cancel out in the flush; with a plain delete, a marker
// per request was written and carried down every level.
func TestLeaseEntriesLeaveNoDeleteMarker(t *testing.T) {
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 4 << 20,
		KeyFilterSize: -1, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const records, lease, ttl = 2000, 30, 86400
	var applied uint64
	for i := 0; i < records; i += 50 {
		var claims, completes []fsm.RecordChange
		for j := i; j < i+50; j++ {
			key := fmt.Appendf(nil, "key-%06d", j)
			claims = append(claims, fsm.RecordChange{Key: key, New: []byte("pending"), NewExpiresAt: lease})
			completes = append(completes, fsm.RecordChange{Key: key, HadOld: true, OldExpiresAt: lease,
				New: []byte("completed"), NewExpiresAt: ttl})
		}
		applied++
		commitRecords(t, s, applied, claims...)
		applied++
		commitRecords(t, s, applied, completes...)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	tables, err := s.db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	var markers uint64
	for _, level := range tables {
		for _, table := range level {
			markers += table.Properties.NumDeletions
		}
	}
	if markers != 0 {
		t.Fatalf("the flushed tables hold %d delete markers for %d completed claims, want none", markers, records)
	}
	due, err := s.Due(ttl, records+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != records {
		t.Fatalf("%d records due at the end of their TTL, want %d", len(due), records)
	}
	if due, err = s.Due(ttl-1, records); err != nil || len(due) != 0 {
		t.Fatalf("%d records due before their TTL (%v), want none: a lease entry came back", len(due), err)
	}
}

// TestSingleDeleteOverTwoSetsIsFatal: were an expiry index entry ever set
// twice, its single delete would let the older set come back. Pebble
// reports it when a compaction meets it, and the store stops as for a
// damaged block. (Two sets that meet in a compaction collapse into the
// newer, so the test holds a snapshot between them, as a view or a key
// filter build may.)
func TestSingleDeleteOverTwoSetsIsFatal(t *testing.T) {
	fatal := make(chan error, 1)
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 4 << 20, KeyFilterSize: -1,
		Fatal: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := expiryKey(30, []byte("key"))
	var snap *pebble.Snapshot
	for _, write := range []func(*pebble.Batch){
		func(b *pebble.Batch) { b.Set(x, nil, nil) },
		func(b *pebble.Batch) {
			snap = s.db.NewSnapshot()
			b.Set(x, nil, nil)
		},
		func(b *pebble.Batch) { b.SingleDelete(x, nil) },
	} {
		b := s.db.NewBatch()
		write(b)
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	err = s.db.Compact(t.Context(), []byte{prefixExpiry}, prefixEnd(prefixExpiry), true)
	snap.Close()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("fatal with %v, want ErrCorrupt", err)
		}
	default:
		t.Fatal("a single delete over two sets compacted without a fatal error")
	}
}
