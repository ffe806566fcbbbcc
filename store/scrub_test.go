package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testutil"
)

// scrubbedStore is a store on a real dir holding tables of records, closed.
func scrubbedStore(t *testing.T) (string, Options) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fsm")
	opts := Options{FS: vfs.Default, CacheSize: 1 << 20, MemTableSize: 1 << 20, KeyFilterSize: -1, // no filter build reading every key at open
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("record body "), 100)
	for i := range 2000 {
		k := fsm.EncodeKey(fsm.RecordKey{Tenant: "t", Scope: "s", Key: fmt.Sprintf("k%05d", i)})
		commitRecords(t, s, uint64(i+1), fsm.RecordChange{Key: k, New: body, NewExpiresAt: int64(i)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, opts
}

// largestTable is the path of the largest .sst under dir.
func largestTable(t *testing.T, dir string) string {
	t.Helper()
	tables, _ := filepath.Glob(filepath.Join(dir, "*", "*.sst"))
	if len(tables) == 0 {
		t.Fatalf("no tables under %s", dir)
	}
	size := func(p string) int64 { fi, _ := os.Stat(p); return fi.Size() }
	sort.Slice(tables, func(i, j int) bool { return size(tables[i]) > size(tables[j]) })
	return tables[0]
}

// TestScrubFindsAFlippedByteInATable: a byte flipped in the middle of a
// table (a data block no read has reached) is found by one pass of the
// scrub and counted, naming the file, while the store stays open; an
// undamaged store passes with nothing counted.
func TestScrubFindsAFlippedByteInATable(t *testing.T) {
	dir, opts := scrubbedStore(t)
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failed []string
	sc := NewScrubber(func() *Store { return s }, ScrubOptions{MinRate: 1 << 30, MaxRate: 1 << 30,
		OnFailure: func(path string, err error) {
			mu.Lock()
			failed = append(failed, fmt.Sprintf("%s: %v", path, err))
			mu.Unlock()
		}})
	if err := sc.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sc.failures.Load() != 0 || sc.passes.Load() != 1 || sc.bytes.Load() == 0 || sc.lastPass.Load() == 0 {
		t.Fatalf("undamaged pass: failures %d, passes %d, bytes %d, %v", sc.failures.Load(), sc.passes.Load(), sc.bytes.Load(), failed)
	}
	s.Close()

	damaged := largestTable(t, dir)
	b, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x01
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, opts); err != nil {
		t.Fatalf("open: %v (the flipped byte must sit in a data block no open reads)", err)
	}
	defer s.Close()
	if err := sc.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sc.failures.Load() != 1 || len(failed) != 1 || !strings.Contains(failed[0], filepath.Base(damaged)) ||
		!strings.Contains(failed[0], "checksum") {
		t.Fatalf("pass over a damaged table: failures %d, reported %v; want one naming %s and a checksum", sc.failures.Load(), failed, damaged)
	}
	t.Log(failed[0])
}

// TestScrubStopsWhenCancelled: a scrub held to its rate ends as soon as
// its context does (the node closing), mid-table.
func TestScrubStopsWhenCancelled(t *testing.T) {
	dir, opts := scrubbedStore(t)
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 1 KiB/s: the first table alone takes minutes.
	sc := NewScrubber(func() *Store { return s }, ScrubOptions{MinRate: 1 << 10, MaxRate: 1 << 10})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sc.Run(ctx); close(done) }()
	testutil.Eventually(t, 10*time.Second, "the scrub reads", func() bool { return sc.bytes.Load() > 0 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the scrub went on after its context ended")
	}
	if sc.passes.Load() != 0 {
		t.Fatalf("a pass at 1 KiB/s finished: %d", sc.passes.Load())
	}
}
