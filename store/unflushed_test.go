package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestLookupsSkippingMemtablesAgree: across many flushes, with records
// written, rewritten and deleted, a lookup that skips the memtables
// answers exactly what a full lookup does, for every key, after every
// commit.
func TestLookupsSkippingMemtablesAgree(t *testing.T) {
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20, flushEvery: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	stored := map[string][]byte{}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%03d", i)) }
	var skipped int
	for applied := uint64(1); applied <= 800; applied++ {
		var changes []fsm.RecordChange
		inCommit := map[string]bool{} // a commit changes each key at most once (fsm.Changes)
		for range rng.IntN(4) + 1 {
			k := key(rng.IntN(64))
			if inCommit[string(k)] {
				continue
			}
			inCommit[string(k)] = true
			_, had := stored[string(k)]
			rc := fsm.RecordChange{Key: k, HadOld: had, OldExpiresAt: 1, NewExpiresAt: 1}
			if !had || rng.IntN(3) > 0 {
				rc.New = bytes.Repeat([]byte{byte(applied)}, 100+rng.IntN(200))
				stored[string(k)] = rc.New
			} else {
				delete(stored, string(k))
			}
			changes = append(changes, rc)
		}
		if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: applied}, Records: changes}); err != nil {
			t.Fatal(err)
		}
		for i := range 64 {
			k := key(i)
			if may, _ := s.unflushed.mayHold(k); !may {
				skipped++
			}
			got, ok, err := s.Get(k)
			want, wantOK := stored[string(k)]
			if err != nil || ok != wantOK || !bytes.Equal(got, want) {
				t.Fatalf("after commit %d, key %s: got %v %x (%v), want %v %x", applied, k, ok, got, err, wantOK, want)
			}
		}
	}
	if skipped == 0 {
		t.Fatal("no lookup skipped the memtables: the test shows nothing")
	}
}

// TestLookupsSkippingMemtablesSeeEveryCommit: a reader on another goroutine
// that learns a commit is done finds its record, whichever way it looks.
func TestLookupsSkippingMemtablesSeeEveryCommit(t *testing.T) {
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20, flushEvery: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := func(i int64) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := done.Load(); n < 3000; n = done.Load() {
				if n == 0 {
					continue
				}
				if _, ok, err := s.Get(key(n)); err != nil || !ok {
					errs <- fmt.Errorf("record %d committed but not found (%v)", n, err)
					return
				}
			}
		}()
	}
	for i := int64(1); i <= 3000; i++ {
		rc := fsm.RecordChange{Key: key(i), New: bytes.Repeat([]byte("v"), 300), NewExpiresAt: 1}
		if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: uint64(i)}, Records: []fsm.RecordChange{rc}}); err != nil {
			t.Fatal(err)
		}
		done.Store(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestUnflushedGenerationsKeepEveryBatch: a generation holds the keys of
// large batches (a set each) and small ones (one shared set); every key
// added stays "may be in a memtable" until the flush after it completes,
// and only then is forgotten.
func TestUnflushedGenerationsKeepEveryBatch(t *testing.T) {
	u := newUnflushed(1<<20, defaultOwnSetKeys)
	batch := func(prefix string, n int) []string {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return keys
	}
	add := func(keys []string, bytes int) { u.add(slices.Values(keys), len(keys), bytes) }
	holds := func(keys []string) bool {
		for _, k := range keys {
			if may, _ := u.mayHold([]byte(k)); !may {
				return false
			}
		}
		return true
	}
	first := make(chan struct{})
	if err := u.rotate(func() (<-chan struct{}, error) { return first, nil }); err != nil {
		t.Fatal(err)
	}
	close(first) // the new store's first flush: from now on keys are tracked
	bigA, small, bigB := batch("a", defaultOwnSetKeys), batch("s", 10), batch("b", 2*defaultOwnSetKeys)
	add(bigA, 1<<19)
	add(small, 1<<10)
	add(bigB, 1<<19)
	if got := len(u.cur); got != 2 {
		t.Fatalf("generation holds %d sets, want 2 (a large batch each; the small one joins the first)", got)
	}
	if !holds(bigA) || !holds(small) || !holds(bigB) {
		t.Fatal("a key added is not in the generation")
	}
	if may, _ := u.mayHold([]byte("never-added")); may {
		t.Fatal("a key never added may be in a memtable")
	}
	flush := make(chan struct{})
	if err := u.rotate(func() (<-chan struct{}, error) { return flush, nil }); err != nil {
		t.Fatal(err)
	}
	later := batch("c", defaultOwnSetKeys)
	add(later, 1<<10)
	if !holds(bigA) || !holds(small) || !holds(bigB) || !holds(later) {
		t.Fatal("a key was forgotten before its flush completed")
	}
	close(flush)
	if may, _ := u.mayHold([]byte(bigB[5])); may {
		t.Fatal("a key flushed is still tracked")
	}
	if !holds(later) {
		t.Fatal("a key of the current generation was forgotten")
	}
}
