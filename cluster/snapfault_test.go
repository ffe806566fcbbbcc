package cluster_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/cluster"
)

// TestOpenRefusesDamagedSnapshot builds a data dir with two snapshots and a
// log compacted past the older one, then damages copies of it. Every copy
// must refuse to start with ErrCorrupt, naming the snapshot — none may fall
// back to the older snapshot, whose log continuation is gone, or to an
// empty state. The undamaged copy must start with the full state.
func TestOpenRefusesDamagedSnapshot(t *testing.T) {
	t.Parallel()
	cfg := soloConfig(t.TempDir(), "127.0.110.5")
	cfg.TrailingLogs = 8 // compaction leaves only 8 entries before the newest snapshot
	n := openSolo(t, cfg)
	ctx := ctxFor(t, 30*time.Second)
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if err := put(ctx, n, fmt.Sprintf("k%d", i), []byte(fmt.Sprintf("body %d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 10)
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	write(10, 20)
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	write(20, 25)
	digest, records := n.Machine().Digest(), n.Machine().Len()
	n.Close()
	snaps := snapshotDirs(t, cfg.DataDir)
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots, want 2", len(snaps))
	}
	newest := filepath.Base(snaps[len(snaps)-1])

	damages := map[string]func(dir string){
		"state.bin truncated": func(dir string) { truncateHalf(t, newestState(t, dir)) },
		"state.bin truncated with matching raft metadata": func(dir string) {
			// raft's CRC-64 and size agree with the cut file, so only the
			// state machine's own format (length, CRC-32C) can tell.
			state := newestState(t, dir)
			truncateHalf(t, state)
			resealMeta(t, state)
		},
		"meta.json unreadable": func(dir string) {
			writeFile(t, filepath.Join(filepath.Dir(newestState(t, dir)), "meta.json"), []byte("{not json"))
		},
		"snapshots removed": func(dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "snapshots")); err != nil {
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
			if name != "snapshots removed" && !strings.Contains(err.Error(), newest) {
				t.Fatalf("error does not name snapshot %s: %v", newest, err)
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

// snapshotDirs lists the snapshot directories of dataDir, oldest first
// (raft names them term-index-time).
func snapshotDirs(t *testing.T, dataDir string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(dataDir, "snapshots", "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(dirs, func(i, j int) bool { return snapshotIndex(dirs[i]) < snapshotIndex(dirs[j]) })
	return dirs
}

func snapshotIndex(dir string) int {
	var term, index int
	fmt.Sscanf(filepath.Base(dir), "%d-%d-", &term, &index)
	return index
}

func newestState(t *testing.T, dataDir string) string {
	dirs := snapshotDirs(t, dataDir)
	return filepath.Join(dirs[len(dirs)-1], "state.bin")
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// resealMeta rewrites the snapshot's meta.json with the size and CRC-64
// of state as it is now.
func resealMeta(t *testing.T, state string) {
	t.Helper()
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	metaPath := filepath.Join(filepath.Dir(state), "meta.json")
	raw, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	h.Write(b)
	meta["Size"], meta["CRC"] = len(b), h.Sum(nil)
	raw, err = json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, metaPath, raw)
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
