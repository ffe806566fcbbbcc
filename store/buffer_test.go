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
// Every hand-off after the first stays in flight for 200 ms: the reads run
// in that time, and the next hand-off or Due waits it out.
func TestReadsSeeTheHandedBatchInFlight(t *testing.T) {
	s, slow := handStore(t)
	k, j := []byte("k"), []byte("j")
	commitRecords(t, s, 1, fsm.RecordChange{Key: k, New: []byte("k1"), NewExpiresAt: 100})
	if err := s.Sync(); err != nil { // k and its entry at 100 are in Pebble
		t.Fatal(err)
	}
	slow.Store(int64(200 * time.Millisecond))

	// In flight: k moves to 300, j is stored at 50.
	commitRecords(t, s, 2,
		fsm.RecordChange{Key: k, HadOld: true, OldExpiresAt: 100, New: []byte("k2"), NewExpiresAt: 300},
		fsm.RecordChange{Key: j, New: []byte("j1"), NewExpiresAt: 50})
	mustBeHanding(t, s)
	if enc, ok, err := s.Get(j); err != nil || !ok || string(enc) != "j1" {
		t.Fatalf("Get(j) = %q %v %v, want j1", enc, ok, err)
	}
	if at, ok, err := s.NextExpiry(); err != nil || !ok || at != 50 {
		t.Fatalf("NextExpiry = %d %v %v, want 50", at, ok, err)
	}

	// In flight: j is deleted, k moves on to 400.
	commitRecords(t, s, 3,
		fsm.RecordChange{Key: j, HadOld: true, OldExpiresAt: 50},
		fsm.RecordChange{Key: k, HadOld: true, OldExpiresAt: 300, New: []byte("k3"), NewExpiresAt: 400})
	mustBeHanding(t, s)
	if at, ok, err := s.NextExpiry(); err != nil || !ok || at != 400 {
		t.Fatalf("NextExpiry = %d %v %v, want 400 (j's entry at 50 is gone)", at, ok, err)
	}

	// In flight: k moves on to 500. Due walks Pebble's index, where k's
	// entry is still at 400.
	commitRecords(t, s, 4, fsm.RecordChange{Key: k, HadOld: true, OldExpiresAt: 400, New: []byte("k4"), NewExpiresAt: 500})
	mustBeHanding(t, s)
	if due, err := s.Due(450, 10); err != nil || len(due) != 0 {
		t.Fatalf("Due(450) = %q %v, want nothing", due, err)
	}
}

// TestExpLowStaysBelowTheHandedBatch: a NextExpiry walk while a handed
// batch is in flight does not see its entries in Pebble, and must not
// raise expLow past them, or Due would start above them.
func TestExpLowStaysBelowTheHandedBatch(t *testing.T) {
	s, slow := handStore(t)
	k, j := []byte("k"), []byte("j")
	commitRecords(t, s, 1, fsm.RecordChange{Key: k, New: []byte("k1"), NewExpiresAt: 100})
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	slow.Store(int64(200 * time.Millisecond))
	commitRecords(t, s, 2, fsm.RecordChange{Key: j, New: []byte("j1"), NewExpiresAt: 50})
	mustBeHanding(t, s)
	if at, ok, err := s.NextExpiry(); err != nil || !ok || at != 50 {
		t.Fatalf("NextExpiry = %d %v %v, want 50", at, ok, err)
	}
	if due, err := s.Due(60, 10); err != nil || len(due) != 1 || string(due[0]) != "j1" {
		t.Fatalf("Due(60) = %q %v, want j1", due, err)
	}
}

func mustBeHanding(t *testing.T, s *Store) {
	t.Helper()
	if !s.buf.handing() {
		t.Fatal("the batch is not in flight")
	}
}
