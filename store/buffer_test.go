package store

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// handStore is a store that hands off every commit; a hand-off made while
// slow is set stays in flight for that long.
func handStore(t *testing.T) (*Store, *atomic.Int64) {
	t.Helper()
	var slow atomic.Int64
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		drainEvery: 1, KeyFilterSize: 4 << 10,
		beforeHandedCommit: func() { time.Sleep(time.Duration(slow.Load())) },
		Fatal:              func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, &slow
}

func commitRecords(t *testing.T, s *Store, index uint64, rcs ...fsm.RecordChange) {
	t.Helper()
	if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: index}, Records: rcs}); err != nil {
		t.Fatal(err)
	}
}

// TestReadsSeeTheHandedBatchInFlight: while a handed batch is being
// committed, lookups, NextExpiry and Due answer as if it were in Pebble.
func TestReadsSeeTheHandedBatchInFlight(t *testing.T) {
	s, slow := handStore(t)
	k, j := []byte("k"), []byte("j")
	commitRecords(t, s, 1, fsm.RecordChange{Key: k, New: []byte("k1"), NewExpiresAt: 100})
	if err := s.Sync(); err != nil { // k and its entry at 100 are in Pebble
		t.Fatal(err)
	}

	// In flight: k moves to 300, j is stored at 50.
	slow.Store(int64(200 * time.Millisecond))
	commitRecords(t, s, 2,
		fsm.RecordChange{Key: k, HadOld: true, OldExpiresAt: 100, New: []byte("k2"), NewExpiresAt: 300},
		fsm.RecordChange{Key: j, New: []byte("j1"), NewExpiresAt: 50})
	slow.Store(0)
	if !s.buf.handing() {
		t.Fatal("the batch is not in flight")
	}
	if enc, ok, err := s.Get(j); err != nil || !ok || string(enc) != "j1" {
		t.Fatalf("Get(j) = %q %v %v, want j1", enc, ok, err)
	}
	if at, ok, err := s.NextExpiry(); err != nil || !ok || at != 50 {
		t.Fatalf("NextExpiry = %d %v %v, want 50", at, ok, err)
	}

	// Still in flight: j is deleted, k moves on to 400.
	slow.Store(int64(200 * time.Millisecond))
	commitRecords(t, s, 3,
		fsm.RecordChange{Key: j, HadOld: true, OldExpiresAt: 50},
		fsm.RecordChange{Key: k, HadOld: true, OldExpiresAt: 300, New: []byte("k3"), NewExpiresAt: 400})
	slow.Store(0)
	if at, ok, err := s.NextExpiry(); err != nil || !ok || at != 400 {
		t.Fatalf("NextExpiry = %d %v %v, want 400 (k's entries at 100 and 300 are gone)", at, ok, err)
	}
	// Due walks Pebble's index: without the deletions in flight it would
	// find j's entry at 50 and k's at 100 and 300.
	slow.Store(int64(200 * time.Millisecond))
	commitRecords(t, s, 4, fsm.RecordChange{Key: k, HadOld: true, OldExpiresAt: 400, New: []byte("k4"), NewExpiresAt: 500})
	slow.Store(0)
	due, err := s.Due(450, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("Due(450) = %q %v, want nothing", due, err)
	}
}
