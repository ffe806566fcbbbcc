package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestLookupsBesideCommitsThatMoveTheRecord: a lookup reads a record's
// position, then the record there; commits beside it (each handing its
// batch off, so Pebble takes it on another goroutine) keep moving the
// record to new positions and removing the old ones. Every lookup must
// still return one of the record's versions, never fail: a position gone
// by the second read means the record moved, and the lookup reads again.
func TestLookupsBesideCommitsThatMoveTheRecord(t *testing.T) {
	s, _ := handStore(t)
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for i, k := range keys {
		commitRecords(t, s, uint64(i+1), fsm.RecordChange{Key: k, New: []byte(string(k) + "-0"), NewExpiresAt: 1})
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := range 2 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				k := keys[(n+r)%len(keys)]
				enc, ok, err := s.Get(k)
				if err != nil || !ok || !strings.HasPrefix(string(enc), string(k)+"-") {
					t.Errorf("Get(%s) = %q %v %v beside commits moving it", k, enc, ok, err)
					return
				}
			}
		})
	}
	index := uint64(len(keys))
	for v := 1; v <= 3000 && !t.Failed(); v++ {
		if v%100 == 0 {
			if err := s.Sync(); err != nil { // flushed, so lookups read the sstables too
				t.Fatal(err)
			}
		}
		k := keys[v%len(keys)]
		index++
		commitRecords(t, s, index, fsm.RecordChange{Key: k, HadOld: true, OldExpiresAt: 1,
			New: []byte(fmt.Sprintf("%s-%d", k, v)), NewExpiresAt: 1})
	}
	close(done)
	wg.Wait()
}

// TestCrashBetweenIngestAndBatchLeavesNoRecordBehind: a hand-off ingests
// its records (durable at once) before it commits the batch whose keys
// refer to them (durable at the next flush). A crash between the two
// leaves records above the last position the store holds: Open removes
// them and never gives their positions again, so no later set lands on
// one (a single delete over two sets would bring a record back), and the
// store holds exactly the commits before the crash's durable point.
func TestCrashBetweenIngestAndBatchLeavesNoRecordBehind(t *testing.T) {
	fs := vfs.NewCrashableMem()
	var clone atomic.Pointer[vfs.MemFS] // set on the hand-off's goroutine
	s, err := Open("fsm", Options{FS: fs, drainEvery: 4 << 10, KeyFilterSize: -1,
		beforeHandedCommit: func() {
			if clone.Load() == nil {
				clone.Store(fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	commitRecords(t, s, 1, fsm.RecordChange{Key: key(0), New: []byte("synced"), NewExpiresAt: 1})
	mustNot(s.Sync())
	for i := 1; clone.Load() == nil; i++ {
		commitRecords(t, s, uint64(i+1), fsm.RecordChange{Key: key(i), New: bytes.Repeat([]byte("r"), 300), NewExpiresAt: 1})
	}
	mustNot(s.Close())
	crashed := clone.Load()

	var last, top uint64
	editCurrentDB(crashed, func(db *pebble.DB) { last, top = positionsOf(t, db) })
	if top <= last {
		t.Fatalf("the crash left no record past the last position (%d, top %d): the test tests nothing", last, top)
	}
	s, err = Open("fsm", Options{FS: crashed})
	if err != nil {
		t.Fatalf("open the store a crash left between an ingest and its batch: %v", err)
	}
	if s.meta.Applied != 1 || s.lastPos != top {
		t.Fatalf("reopened at index %d with last position %d, want 1 and %d", s.meta.Applied, s.lastPos, top)
	}
	if enc, found, err := s.Get(key(0)); err != nil || !found || string(enc) != "synced" {
		t.Fatalf("the synced record: %q %v %v", enc, found, err)
	}
	commitRecords(t, s, 2, fsm.RecordChange{Key: key(0), HadOld: true, OldExpiresAt: 1, New: []byte("after"), NewExpiresAt: 1},
		fsm.RecordChange{Key: key(1), New: []byte("new"), NewExpiresAt: 1})
	mustNot(s.Sync())
	mustNot(s.Close())
	editCurrentDB(crashed, func(db *pebble.DB) {
		if last, top := positionsOf(t, db); last != top || countValues(t, db) != 2 {
			t.Fatalf("after the reopen: last position %d, top %d, %d records; want the two committed, nothing past the last",
				last, top, countValues(t, db))
		}
	})
}

// positionsOf returns the last position db's store gave and the highest
// position a record is stored at.
func positionsOf(t *testing.T, db *pebble.DB) (last, top uint64) {
	t.Helper()
	v, closer, err := db.Get(positionKey)
	mustNot(err)
	last = binary.BigEndian.Uint64(v)
	closer.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixValue}, UpperBound: prefixEnd(prefixValue)})
	mustNot(err)
	if it.Last() {
		top = binary.BigEndian.Uint64(it.Key()[1:])
	}
	mustNot(it.Close())
	return last, top
}

func countValues(t *testing.T, db *pebble.DB) int {
	t.Helper()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixValue}, UpperBound: prefixEnd(prefixValue)})
	mustNot(err)
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	mustNot(it.Close())
	return n
}

// TestExpireCommitReusesDuesPositions: the commit that expires what Due
// returned finds each record's position where Due read it, not by a
// second lookup in Pebble: no block is read between Due and the commit.
// The count is the block cache's, which Pebble's own compactions read
// through too: about once in 300 runs, one of the tables the sync flushed
// was compacted while the commit ran (2 to 8 blocks). So a fresh store
// tries again, up to three times; a commit that looked its records up
// would read blocks at every try.
func TestExpireCommitReusesDuesPositions(t *testing.T) {
	var reads []int64
	for range 3 {
		read := blocksReadExpiringDue(t)
		if read == 0 {
			return
		}
		reads = append(reads, read)
	}
	t.Fatalf("the commit expiring what Due returned read blocks at each try: %v", reads)
}

// blocksReadExpiringDue stores records due at once, flushes them, takes
// them from Due and expires them in one commit, and returns the blocks that
// commit read.
func blocksReadExpiringDue(t *testing.T) int64 {
	const records = 200
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 4 << 20,
		KeyFilterSize: -1, dueSoonSize: -1, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var expire []fsm.RecordChange
	for i := range records {
		key := fmt.Appendf(nil, "key-%04d", i)
		commitRecords(t, s, uint64(i+1), fsm.RecordChange{Key: key, New: []byte("pending"), NewExpiresAt: 10})
		expire = append(expire, fsm.RecordChange{Key: key, HadOld: true, OldExpiresAt: 10})
	}
	mustNot(s.Sync()) // in the sstables, none in the buffer
	if due, err := s.Due(10, records); err != nil || len(due) != records {
		t.Fatalf("Due: %d records (%v), want %d", len(due), err, records)
	}
	before := blockReads(s)
	commitRecords(t, s, records+1, expire...)
	read := blockReads(s) - before
	for _, rc := range expire[:3] {
		if _, ok, err := s.Get(rc.Key); ok || err != nil {
			t.Fatalf("Get(%s) after its expiry: %v %v", rc.Key, ok, err)
		}
	}
	return read
}

// TestHandOffIngestsRecordsIntoTheBottomLevel: a hand-off's records go
// into the bottom level at once, even when a table there holds every other
// kind of key: the records sort last (keys.go), so new positions lie past
// that table's bounds. With the expiry index after them, the table spans
// them and the ingest lands above it, to be rewritten by compactions.
func TestHandOffIngestsRecordsIntoTheBottomLevel(t *testing.T) {
	s, err := Open("fsm", Options{FS: vfs.NewMem(), drainEvery: 16 << 10, KeyFilterSize: -1,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("r"), 500)
	commit := func(from, to int) {
		for i := from; i < to; i++ {
			commitRecords(t, s, uint64(i+1), fsm.RecordChange{Key: fmt.Appendf(nil, "k%04d", i), New: body, NewExpiresAt: int64(i)})
		}
	}
	commit(0, 10)
	mustNot(s.Sync())
	mustNot(s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true))
	bottom := len(s.db.Metrics().Levels) - 1
	before := s.db.Metrics().Levels[bottom].TablesIngested
	commit(10, 100) // past drainEvery: a hand-off
	mustNot(s.Sync())
	m := s.db.Metrics()
	if m.Levels[bottom].TablesIngested == before {
		t.Fatalf("no table ingested into the bottom level; the levels:\n%s", m)
	}
	for level := range bottom {
		if m.Levels[level].TablesIngested != 0 {
			t.Fatalf("a hand-off's table went into level %d, not the bottom:\n%s", level, m)
		}
	}
}
