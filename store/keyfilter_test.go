package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

func TestKeyFilterNeverForgetsAKey(t *testing.T) {
	f := newKeyFilter(64 << 10) // 524 288 bits: ~10 a key below
	key := func(i int) []byte { return []byte(fmt.Sprintf("t/s/key-%d", i)) }
	const n = 50_000
	for i := range n {
		f.add(key(i))
	}
	for i := range n {
		if !f.mayHold(key(i)) {
			t.Fatalf("key %d was added but the filter says it is absent", i)
		}
	}
	if got, want := f.set.Load(), f.countSet(); got != want {
		t.Fatalf("the filter counted %d bits set, %d are", got, want)
	}
	maybes := 0
	for i := n; i < 2*n; i++ {
		if f.mayHold(key(i)) {
			maybes++
		}
	}
	// fill^6 predicts the rate; a blocked filter does a little worse.
	if rate, predicted := float64(maybes)/n, pow6(f.fill()); rate > 2*predicted+0.002 {
		t.Fatalf("%.4f of fresh keys pass, a filter %.2f full should pass about %.4f", rate, f.fill(), predicted)
	}
}

func pow6(x float64) float64 { return x * x * x * x * x * x }

// TestFilterRebuildsLoseNoKey: with a filter far too small for the records,
// rebuilds follow one another while records are written and deleted, and
// a reader on another goroutine finds every record the moment its commit
// is done; deleted keys leave the filter at its next rebuild.
func TestFilterRebuildsLoseNoKey(t *testing.T) {
	// Handed batches land at any point of a rebuild's start.
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		flushEvery: 8 << 10, KeyFilterSize: 1 << 10, drainEvery: 2 << 10, ownSetKeys: 1,
		beforeHandedCommit: func() { time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := func(i int64) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	const kept = 100 // the last 100 records stay stored
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := done.Load(); n < 6000; n = done.Load() {
			if n == 0 {
				continue
			}
			_, ok, err := s.Get(key(n))
			// The commit that deletes n may be running once n+kept-1 is done.
			if deleted := done.Load() >= n+kept-1; err != nil || !ok && !deleted {
				errs <- fmt.Errorf("record %d committed but not found (%v)", n, err)
				return
			}
		}
	}()
	for i := int64(1); i <= 6000; i++ {
		changes := []fsm.RecordChange{{Key: key(i), New: bytes.Repeat([]byte("v"), 100), NewExpiresAt: i}}
		if i > kept {
			changes = append(changes, fsm.RecordChange{Key: key(i - kept), HadOld: true, OldExpiresAt: i - kept})
		}
		if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: uint64(i)}, Records: changes}); err != nil {
			t.Fatal(err)
		}
		done.Store(i)
		if i%50 == 0 {
			for k := max(1, i-kept+1); k <= i; k++ {
				if _, ok, err := s.Get(key(k)); err != nil || !ok {
					t.Fatalf("after commit %d, record %d not found (%v)", i, k, err)
				}
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.builds.Wait()
	if _, built := s.KeyFilter(); built < 3 {
		t.Fatalf("%d filters built: the test crossed no rebuild", built)
	}
	// One more build, with nothing committed beside it nor buffered (the
	// snapshot would still show the records the buffer deletes): 100
	// records set at most 600 of the filter's 8 192 bits.
	mustNot(s.Sync())
	s.startFilterBuild()
	s.builds.Wait()
	if fill, _ := s.KeyFilter(); fill > 600.0/8192 {
		t.Fatalf("the filter is %.2f full with 100 records stored: deleted keys were not dropped", fill)
	}
}

// TestCloseWaitsForFilterBuild: a store closed while its first filter is
// being built can be opened again at once (the build held the database
// open), and finds its records.
func TestCloseWaitsForFilterBuild(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{FS: fs, CacheSize: 1 << 20, MemTableSize: 1 << 20}
	s, err := Open("fsm", opts)
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	for i := range 20_000 {
		rc := fsm.RecordChange{Key: key(i), New: []byte("v"), NewExpiresAt: int64(i)}
		if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: uint64(i + 1)}, Records: []fsm.RecordChange{rc}}); err != nil {
			t.Fatal(err)
		}
	}
	mustNot(s.Close())
	for range 3 {
		if s, err = Open("fsm", opts); err != nil {
			t.Fatalf("reopen while the last build may have run: %v", err)
		}
		mustNot(s.Close())
	}
	if s, err = Open("fsm", opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.builds.Wait()
	for _, i := range []int{0, 9_999, 19_999} {
		if _, ok, err := s.Get(key(i)); err != nil || !ok {
			t.Fatalf("record %d not found after reopening (%v)", i, err)
		}
	}
	if _, built := s.KeyFilter(); built != 1 {
		t.Fatalf("%d filters built after open, want 1", built)
	}
}
