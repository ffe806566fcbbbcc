package store

import (
	"fmt"
	"strings"
	"sync"
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

// TestRecordAboveTheLastPositionIsRefused: a record stored past the last
// position the store gave would be overwritten by a later commit, its
// single delete then meeting two sets: the store is refused at open.
func TestRecordAboveTheLastPositionIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("fsm", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	commitRecords(t, s, 1, fsm.RecordChange{Key: []byte("k"), New: []byte("r"), NewExpiresAt: 1})
	mustNot(s.Sync())
	mustNot(s.Close())

	editCurrentDB(fs, func(db *pebble.DB) { mustNot(db.Set(valueKey(2), []byte("stray"), pebble.NoSync)) })

	if s, err := Open("fsm", Options{FS: fs}); err == nil || !strings.Contains(err.Error(), "past the last one given") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open a store with a record past its last position: %v", err)
	}
}

// TestExpireCommitReusesDuesPositions: the commit that expires what Due
// returned finds each record's position where Due read it, not by a
// second lookup in Pebble: no block is read between Due and the commit.
func TestExpireCommitReusesDuesPositions(t *testing.T) {
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
	if read := blockReads(s) - before; read != 0 {
		t.Fatalf("the commit expiring what Due returned read %d blocks", read)
	}
	for _, rc := range expire[:3] {
		if _, ok, err := s.Get(rc.Key); ok || err != nil {
			t.Fatalf("Get(%s) after its expiry: %v %v", rc.Key, ok, err)
		}
	}
}
