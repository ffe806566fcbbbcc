package store

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestNextExpirySkipsCompletedLeases: completing watched records moves their
// expiry index entries from the lease end to the expiry, leaving delete
// markers at the low end of the index; NextExpiry steps over them once and
// starts after them from then on.
func TestNextExpirySkipsCompletedLeases(t *testing.T) {
	n := openNode(t, vfs.NewCrashableMem())
	defer n.m.Close()
	s := n.m.Store().(*Store)
	index := uint64(0)
	apply := func(c *fsm.Command) fsm.Result {
		index++
		return n.m.Apply(index, c)
	}
	for i := range 200 {
		res := apply(&fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: fsm.RecordKey{Key: fmt.Sprint("k", i)}, Owner: "o",
			Lease: sec, TTL: 3600 * sec, WatchAbandon: true})
		apply(&fsm.Command{Type: fsm.TypeComplete, Now: t0, Key: res.Record.RecordKey, Token: res.Record.Token,
			Response: &fsm.Response{Status: 201}})
	}
	held := apply(&fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: fsm.RecordKey{Key: "held"}, Owner: "o",
		Lease: 30 * sec, TTL: 3600 * sec, WatchAbandon: true})
	mustNot(s.Sync()) // the commits leave the write buffer: their delete markers are in Pebble
	next, ok := n.m.NextExpiry()
	if !ok || next != held.Record.LeaseExpiresAt {
		t.Fatalf("next expiry %d %v, want the held record's lease end %d", next, ok, held.Record.LeaseExpiresAt)
	}
	s.mu.Lock()
	low := s.expLow
	s.mu.Unlock()
	if want := expiryKey(next, fsm.EncodeKey(held.Record.RecordKey)); string(low) != string(want) {
		t.Fatalf("expLow %x, want the held record's entry %x", low, want)
	}
}

// TestNextExpiryBesideCommitsHidesNothing: NextExpiry, which runs beside
// the commits (the leader's ticker), never moves expLow past a key a commit
// inserted while it walked: every record stays due.
func TestNextExpiryBesideCommitsHidesNothing(t *testing.T) {
	n := openNode(t, vfs.NewCrashableMem())
	defer n.m.Close()
	const records = 2000
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				n.m.NextExpiry()
			}
		}
	}()
	rng := rand.New(rand.NewPCG(7, 8))
	var index uint64
	var held []*fsm.Record
	for i := range records {
		// Leases and TTLs jump around, and completions delete the lowest
		// entries, so commits often insert between expLow and the first
		// entry a walk finds.
		index++
		res := n.m.Apply(index, &fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: fsm.RecordKey{Key: fmt.Sprint("k", i)},
			Owner: "o", Lease: int64(1+rng.IntN(100)) * sec, TTL: int64(100+rng.IntN(900)) * sec, WatchAbandon: true})
		held = append(held, res.Record)
		if rng.IntN(2) == 0 {
			j := rng.IntN(len(held))
			r := held[j]
			held = append(held[:j], held[j+1:]...)
			index++
			n.m.Apply(index, &fsm.Command{Type: fsm.TypeComplete, Now: t0, Key: r.RecordKey, Token: r.Token,
				Response: &fsm.Response{Status: 201}})
		}
	}
	close(stop)
	wg.Wait()
	due, err := n.m.Store().Due(t0+2000*sec, records+1)
	if err != nil || len(due) != records {
		t.Fatalf("%d records due after every TTL, want %d (%v)", len(due), records, err)
	}
}

// TestPeekKeepsKeysInsertedMeanwhile replays the interleaving NextExpiry
// must survive: a commit inserts a key below the first entry the walk
// found, after the walk's iterator was made. expLow goes no higher than it.
func TestPeekKeepsKeysInsertedMeanwhile(t *testing.T) {
	n := openNode(t, vfs.NewCrashableMem())
	defer n.m.Close()
	s := n.m.Store().(*Store)
	put := func(applied uint64, key string, at int64) {
		t.Helper()
		k := fsm.EncodeKey(fsm.RecordKey{Key: key})
		r := &fsm.Record{RecordKey: fsm.RecordKey{Key: key}, State: fsm.StatePending, Owner: "o", Token: applied << 16,
			Attempt: 1, LeaseExpiresAt: at, CreatedAt: t0, ExpiresAt: at}
		err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: applied, Now: t0},
			Records: []fsm.RecordChange{{Key: k, New: fsm.EncodeRecord(r), NewExpiresAt: at}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(1, "late", t0+100*sec)
	mustNot(s.Sync()) // out of the write buffer, for the walk to find
	low := s.startPeek()
	var first []byte
	s.walkExpiry(low, func(at int64, key []byte) (bool, error) {
		first = expiryKey(at, key)
		return false, nil
	})
	put(2, "early", t0+50*sec) // committed while the walk ran, below what it found
	mustNot(s.Sync())          // out of the write buffer: only insertedLow says where it is
	s.endPeek(low, first)
	if next, ok, _ := s.NextExpiry(); !ok || next != t0+50*sec {
		t.Fatalf("next expiry %d, want the key inserted meanwhile (%d)", next, t0+50*sec)
	}
	if due, _ := s.Due(t0+100*sec, 10); len(due) != 2 {
		t.Fatalf("%d records due, want 2", len(due))
	}
}
