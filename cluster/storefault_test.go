package cluster_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testutil"
)

// storedSolo builds a one-node data dir with a snapshot (the store made
// durable, the log compacted past its start) and entries after it, and
// returns its config, digest and record count, closed.
func storedSolo(t *testing.T, ip string) (cluster.Config, string, int) {
	t.Helper()
	cfg := soloConfig(t.TempDir(), ip)
	cfg.TrailingLogs = 8 // compaction leaves only 8 entries before the snapshot
	n := openSolo(t, cfg)
	ctx := ctxFor(t, 30*time.Second)
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if err := put(ctx, n, fmt.Sprintf("k%d", i), []byte(fmt.Sprintf("body %d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 20)
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	write(20, 25)
	digest, records := n.Machine().Digest(), n.Machine().Len()
	n.Close()
	return cfg, digest, records
}

// storeDB opens the data dir's current Pebble database directly, to damage it.
func storeDB(t *testing.T, dataDir string) *pebble.DB {
	t.Helper()
	cur, err := os.ReadFile(filepath.Join(dataDir, "fsm", "CURRENT"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(filepath.Join(dataDir, "fsm", strings.TrimSpace(string(cur))), &pebble.Options{DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func setKey(t *testing.T, dataDir string, key, value []byte) {
	t.Helper()
	db := storeDB(t, dataDir)
	if err := db.Set(key, value, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// TestOpenRefusesDamagedStore damages copies of a data dir. Every copy
// must refuse to start with ErrCorrupt and the remedy: none may start from
// an empty state or from metadata it cannot read. The undamaged copy
// starts with the full state, replaying the log after the store.
func TestOpenRefusesDamagedStore(t *testing.T) {
	t.Parallel()
	cfg, digest, records := storedSolo(t, testaddr.New(t).IP(1))
	damages := map[string]func(dir string){
		"CURRENT unreadable":  func(dir string) { writeFile(t, filepath.Join(dir, "fsm", "CURRENT"), []byte("../elsewhere\n")) },
		"metadata unreadable": func(dir string) { setKey(t, dir, []byte("m"), []byte{9, 9, 9}) },
		"format of another release": func(dir string) {
			setKey(t, dir, []byte("f"), binary.AppendUvarint(nil, 99))
		},
		"store removed": func(dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "fsm")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			c := cfg
			c.DataDir = copyDir(t, cfg.DataDir)
			damage(c.DataDir)
			_, err := cluster.Open(c)
			if !errors.Is(err, cluster.ErrCorrupt) || !strings.Contains(err.Error(), "wipe the data dir and rejoin") {
				t.Fatalf("open: %v; want ErrCorrupt with the remedy", err)
			}
			t.Log(err)
		})
	}
	t.Run("undamaged", func(t *testing.T) {
		c := cfg
		c.DataDir = copyDir(t, cfg.DataDir)
		again := openSolo(t, c)
		if again.Machine().Len() != records || again.Machine().Digest() != digest {
			t.Fatalf("reopened with %d records (want %d), digest equal: %v", again.Machine().Len(), records,
				again.Machine().Digest() == digest)
		}
	})
}

// TestBadBlockStopsTheNode: Pebble checks a block's checksum when it reads
// the block, not at open, so a damaged table opens fine; the first read of
// the damaged block must stop the node with exit code 3, never answer as
// if the record were absent.
func TestBadBlockStopsTheNode(t *testing.T) {
	t.Parallel()
	cfg, _, _ := storedSolo(t, testaddr.New(t).IP(1))
	c := cfg
	c.DataDir = copyDir(t, cfg.DataDir)
	tables, _ := filepath.Glob(filepath.Join(c.DataDir, "fsm", "store-*", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table files to damage")
	}
	for _, tbl := range tables {
		flipMiddle(t, tbl)
	}
	var mu sync.Mutex
	var codes []int
	c = cluster.WithExitHook(c, func(code int) { mu.Lock(); codes = append(codes, code); mu.Unlock() })
	// The damaged block may hold the store's metadata, read at open, or
	// only records, read later: either read must stop the node.
	if n, err := cluster.Open(c); err == nil {
		defer n.Close()
		func() {
			defer func() { recover() }() // with the exit hook the node goes on, and the state machine panics
			for i := range 25 {
				n.Machine().Get(fsm.RecordKey{Tenant: "t1", Scope: "POST /v1", Key: fmt.Sprintf("k%d", i)})
			}
		}()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(codes) == 0 || codes[0] != 3 {
		t.Fatalf("exit codes %v after reading a damaged block, want 3", codes)
	}
}

// flipMiddle inverts a few bytes in the middle of a file (inside a data block).
func flipMiddle(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b)/3 - 4; i < len(b)/3+4; i++ {
		b[i] ^= 0xff
	}
	writeFile(t, path, b)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the tree at src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestScrubCountsADamagedTable: a node started on a store with a byte
// flipped in a table that no start-up read reaches finds it in its
// background scrub and counts it on /metrics, without reading it through
// Pebble first; the undamaged copy scrubs clean.
func TestScrubCountsADamagedTable(t *testing.T) {
	t.Parallel()
	cfg := soloConfig(t.TempDir(), testaddr.New(t).IP(1))
	n := openSolo(t, cfg)
	ctx := ctxFor(t, 30*time.Second)
	for i := range 200 { // records enough that the middle of the largest table is one of them
		if err := put(ctx, n, fmt.Sprintf("k%d", i), bytes.Repeat([]byte{byte(i)}, 4<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Raft().Snapshot().Error(); err != nil { // flushes the store into tables
		t.Fatal(err)
	}
	n.Close()
	for _, damage := range []bool{false, true} {
		c := cfg
		c.DataDir = copyDir(t, cfg.DataDir)
		if damage {
			flipMiddle(t, largestFile(t, filepath.Join(c.DataDir, "fsm", "store-*", "*.sst")))
		}
		reg := prometheus.NewRegistry()
		c.Metrics, c.StoreScrubPeriod, c.StoreKeyFilterSize = reg, 50*time.Millisecond, -1
		var exits exitCodes
		c = cluster.WithExitHook(c, exits.hook("solo"))
		n, err := cluster.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 20*time.Second, "a scrub pass", func() error {
			if passes, _ := gathered(t, reg, "idemnode_store_scrub_passes_total"); passes < 1 {
				return fmt.Errorf("%v passes", passes)
			}
			return nil
		})
		failures, _ := gathered(t, reg, "idemnode_store_scrub_failures_total")
		read, _ := gathered(t, reg, "idemnode_store_scrub_bytes_total")
		n.Close()
		if damage && failures < 1 || !damage && failures != 0 || read == 0 {
			t.Fatalf("damaged %v: %v failures, %v bytes read", damage, failures, read)
		}
		t.Logf("damaged %v: %v failures, %v bytes read, exits %v", damage, failures, read, exits.get())
	}
}

// largestFile is the largest file matching pattern.
func largestFile(t *testing.T, pattern string) string {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	var largest string
	var size int64 = -1
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > size {
			largest, size = f, fi.Size()
		}
	}
	if largest == "" {
		t.Fatalf("no file matches %s", pattern)
	}
	return largest
}
