package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testutil"
)

// Faults of the disk (issue 8, point 4): a data dir that is read-only,
// full, or holds a damaged log or snapshot. Each test runs a standalone node
// on an address of its own (package testaddr). Mounts need root (tests run as root
// here); without it they skip with the reason.

// soloConfig is a standalone one-node cluster on dir.
func soloConfig(dir, ip string) cluster.Config {
	// Small log segments, so that a test's small file system holds one and
	// the log rotates into new ones while a test fills the disk.
	return cluster.Config{NodeID: "solo", DataDir: dir, RaftAddr: ip + ":0", Bootstrap: true, LogSegmentSize: 1 << 20}
}

// openSolo opens cfg and waits until it serves linearizable reads.
func openSolo(t *testing.T, cfg cluster.Config) *cluster.Node {
	t.Helper()
	n, err := cluster.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	testutil.Eventually(t, 20*time.Second, "node serves", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return n.LinearizableBarrier(ctx)
	})
	return n
}

// mount runs mount(8) with args and unmounts target when the test ends; it
// skips the test when mounting is not possible here.
func mount(t *testing.T, target string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a file system for the data dir")
	}
	if out, err := exec.Command("mount", append(args, target)...).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here (%v): %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", target).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", target, err, out)
		}
	})
}

// mountTmpfs mounts a tmpfs of size (e.g. "4m") on a new directory.
func mountTmpfs(t *testing.T, size string) string {
	dir := t.TempDir()
	mount(t, dir, "-t", "tmpfs", "-o", "size="+size, "tmpfs")
	return dir
}

// fill writes a file in dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return path
		}
	}
}

// put claims and completes key with body and returns the first error.
func put(ctx context.Context, n *cluster.Node, key string, body []byte) error {
	k := fsm.RecordKey{Tenant: "t1", Scope: "POST /v1", Key: key}
	res, err := n.Apply(ctx, &fsm.Command{Type: fsm.TypeClaim, Key: k, Fingerprint: []byte("fp"), Owner: "o",
		Lease: int64(time.Minute), TTL: int64(time.Hour)})
	if err != nil {
		return fmt.Errorf("claim %s: %w", key, err)
	}
	if res.Outcome != fsm.OutcomeWon {
		return fmt.Errorf("claim %s: %v", key, res.Outcome)
	}
	_, err = n.Apply(ctx, &fsm.Command{Type: fsm.TypeComplete, Key: k, Token: res.Record.Token,
		Response: &fsm.Response{Status: 201, Body: body}})
	if err != nil {
		return fmt.Errorf("complete %s: %w", key, err)
	}
	return nil
}

// checkStored requires every key of want completed with its body.
func checkStored(t *testing.T, m *fsm.Machine, want map[string][]byte) {
	t.Helper()
	for key, body := range want {
		r, ok := m.Get(fsm.RecordKey{Tenant: "t1", Scope: "POST /v1", Key: key})
		if !ok || r.State != fsm.StateCompleted || !bytes.Equal(r.Response.Body, body) {
			t.Fatalf("acknowledged record %s: found %v, state %v", key, ok, r)
		}
	}
}

// TestOpenRefusesReadOnlyDataDir: a node with state whose data dir became
// read-only refuses to start, saying so, rather than failing on its first
// log write after it joined.
func TestOpenRefusesReadOnlyDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := soloConfig(dir, testaddr.New(t).IP(1))
	n := openSolo(t, cfg)
	if err := put(ctxFor(t, 10*time.Second), n, "k", []byte("body")); err != nil {
		t.Fatal(err)
	}
	n.Close()
	mount(t, dir, "--bind", dir)
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	_, err := cluster.Open(cfg)
	if !errors.Is(err, cluster.ErrDataDir) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("open on a read-only data dir: %v; want ErrDataDir naming read-only", err)
	}
	t.Log(err)
}

// TestOpenRefusesFullDataDir: a data dir on a full disk refuses the start.
func TestOpenRefusesFullDataDir(t *testing.T) {
	t.Parallel()
	fs := mountTmpfs(t, "2m")
	data := filepath.Join(fs, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	fill(t, fs)
	_, err := cluster.Open(soloConfig(data, testaddr.New(t).IP(1)))
	if !errors.Is(err, cluster.ErrDataDir) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("open on a full disk: %v; want ErrDataDir naming it full", err)
	}
	t.Log(err)
}

// TestDiskFillsWhileServing: when the disk fills under a running leader,
// the write that does not fit fails with the disk's error and the node ends
// its process (the log is crash-only, see guardedLogStore); nothing
// acknowledged is lost, nothing refused is visible, and once space is back
// the restarted node holds exactly the acknowledged state and takes writes.
func TestDiskFillsWhileServing(t *testing.T) {
	t.Parallel()
	fs := mountTmpfs(t, "200m") // the free-space reserve with the defaults (193 MiB) and a little
	// The node keeps running after the hook (a real process would be gone)
	// and may fail more writes; only the first exit matters, and the hook
	// must never block raft.
	exits := make(chan int, 1)
	exit := func(code int) {
		select {
		case exits <- code:
		default:
		}
	}
	cfg := cluster.WithExitHook(soloConfig(filepath.Join(fs, "data"), testaddr.New(t).IP(1)), exit)
	n := openSolo(t, cfg)
	ctx := ctxFor(t, time.Minute)
	body := bytes.Repeat([]byte("b"), 32<<10)
	acked := map[string][]byte{}
	for i := range 8 {
		key := fmt.Sprintf("before-%d", i)
		if err := put(ctx, n, key, body); err != nil {
			t.Fatal(err)
		}
		acked[key] = body
	}
	filler := fill(t, fs)
	var failed error
	var refused string
	for i := 0; failed == nil; i++ {
		if i == 1000 {
			t.Fatal("a thousand 32 KiB writes fit on a full disk")
		}
		refused = fmt.Sprintf("full-%d", i)
		if failed = put(ctx, n, refused, body); failed == nil {
			acked[refused] = body // the current log segment has room preallocated
		}
	}
	if !strings.Contains(failed.Error(), "no space left") {
		t.Fatalf("write on a full disk failed with %v; want the disk's error", failed)
	}
	t.Logf("write refused: %v", failed)
	select {
	case code := <-exits:
		if code != 3 {
			t.Fatalf("exit code %d after a failed log write, want 3", code)
		}
	default:
		t.Fatal("the node went on after a failed log write instead of exiting")
	}
	checkStored(t, n.Machine(), acked)
	if r, ok := n.Machine().Get(fsm.RecordKey{Tenant: "t1", Scope: "POST /v1", Key: refused}); ok && r.State == fsm.StateCompleted {
		t.Fatalf("refused write is visible: %+v", r)
	}
	n.Close() // what the exit does to a real process
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	again := openSolo(t, cfg)
	checkStored(t, again.Machine(), acked)
	if r, ok := again.Machine().Get(fsm.RecordKey{Tenant: "t1", Scope: "POST /v1", Key: refused}); ok && r.State == fsm.StateCompleted {
		t.Fatalf("refused write is visible after the restart: %+v", r)
	}
	if err := put(ctx, again, "after-restart", []byte("small")); err != nil {
		t.Fatalf("write once space is back: %v", err)
	}
}

// TestOpenRefusesFlippedByteInLog: one byte flipped inside a command stored
// in the log's segment files stops the start with an error naming the entry, instead of the
// command decoding into another key.
func TestOpenRefusesFlippedByteInLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := soloConfig(dir, testaddr.New(t).IP(1))
	n := openSolo(t, cfg)
	ctx := ctxFor(t, 10*time.Second)
	const marked = "flip-me-in-the-log"
	var index uint64
	for i, key := range []string{"a", marked, "b", "c"} {
		res, err := n.Apply(ctx, &fsm.Command{Type: fsm.TypeClaim, Key: fsm.RecordKey{Key: key}, Owner: "o",
			Lease: int64(time.Minute), TTL: int64(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			index = res.Record.Token >> 16
		}
	}
	n.Close()
	segments, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(segments) == 0 {
		t.Fatalf("no log segments in %s: %v", dir, err)
	}
	flipped := 0
	for _, seg := range segments {
		flipped += flipInFile(t, seg, []byte(marked))
	}
	if flipped == 0 {
		t.Fatalf("%q not found in %v", marked, segments)
	}
	_, err = cluster.Open(cfg)
	want := fmt.Sprintf("log entry %d is corrupt", index)
	if !errors.Is(err, cluster.ErrCorrupt) || !errors.Is(err, fsm.ErrChecksum) || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "wipe the data dir and rejoin") {
		t.Fatalf("open with a flipped byte in entry %d: %v; want %q with a checksum mismatch", index, err, want)
	}
	t.Log(err)
}

// flipInFile flips one bit in the middle of every occurrence of marker in
// path and returns how many.
func flipInFile(t *testing.T, path string, marker []byte) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for at := 0; ; n++ {
		i := bytes.Index(b[at:], marker)
		if i < 0 {
			break
		}
		b[at+i+len(marker)/2] ^= 0x01
		at += i + len(marker)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenRefusesBelowFreeSpaceReserve: a data dir whose file system has
// room for the 1 MiB probe but not for the store's flushes and compaction
// and the log's next segment refuses to start, saying how much it needs,
// what it has and the rule; with smaller memtables the same disk starts.
func TestOpenRefusesBelowFreeSpaceReserve(t *testing.T) {
	t.Parallel()
	fs := mountTmpfs(t, "16m")
	cfg := soloConfig(filepath.Join(fs, "data"), testaddr.New(t).IP(1))
	_, err := cluster.Open(cfg)
	// The defaults: 6 × 32 MiB memtables + one 1 MiB log segment.
	want := "needs 193 MiB free to start"
	if !errors.Is(err, cluster.ErrDataDir) || err == nil || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "free space on") {
		t.Fatalf("open with 16 MiB free: %v; want ErrDataDir saying %q", err, want)
	}
	t.Log(err)
	cfg.StoreMemTableSize = 1 << 20 // 6 MiB + 1 MiB
	n := openSolo(t, cfg)
	if err := put(ctxFor(t, 10*time.Second), n, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesDataDirInUse: a second node on a data dir a node runs on
// is refused at once, saying the dir is in use, not with the kernel's
// "resource temporarily unavailable" from a store deep inside; once the
// first closes, the dir opens again.
func TestOpenRefusesDataDirInUse(t *testing.T) {
	t.Parallel()
	cfg := soloConfig(t.TempDir(), "127.0.0.1") // port 0: no address to share
	first := openSolo(t, cfg)
	_, err := cluster.Open(cfg)
	if !errors.Is(err, cluster.ErrDataDirInUse) || !strings.Contains(err.Error(), "data dir in use: "+cfg.DataDir) {
		t.Fatalf("second node on the data dir: %v; want ErrDataDirInUse naming the dir", err)
	}
	t.Log(err)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openSolo(t, cfg).Close()
}
