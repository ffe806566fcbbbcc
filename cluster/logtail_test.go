package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
)

// A damaged last batch of the log (issue: adversarial probe, finding 6).
// raft-wal drops a last batch whose checksum fails as a torn write; a store
// that had applied it then stood past the log's end, and every start ended
// in "non-monotonic log entries".

// exitCodes records the codes a node would have exited with.
type exitCodes struct {
	mu    sync.Mutex
	codes []string
}

func (e *exitCodes) hook(node string) func(int) {
	return func(code int) {
		e.mu.Lock()
		e.codes = append(e.codes, fmt.Sprintf("%s:%d", node, code))
		e.mu.Unlock()
	}
}

func (e *exitCodes) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.codes...)
}

// tailSegment is the log segment with the highest base index.
func tailSegment(t *testing.T, dataDir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dataDir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segments in %s: %v", dataDir, err)
	}
	sort.Strings(segs) // names start with the zero-padded base index
	return segs[len(segs)-1]
}

// tailWritten reads the tail segment and finds the last byte written in
// it (the segment is zero-filled beyond).
func tailWritten(t *testing.T, dataDir string) (path string, b []byte, end int) {
	t.Helper()
	path = tailSegment(t, dataDir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end = len(b) - 1
	for end >= 0 && b[end] == 0 {
		end--
	}
	if end < 64 {
		t.Fatalf("%s holds no batch", path)
	}
	return path, b, end
}

// flipInLastBatch flips one bit inside the last entry of the tail
// segment's written data, just before the last commit frame.
func flipInLastBatch(t *testing.T, dataDir string) {
	t.Helper()
	path, b, end := tailWritten(t, dataDir)
	// The commit frame is the last 8 bytes written; 12 before its end is
	// inside the last entry.
	b[end-12] ^= 0x10
	writeFile(t, path, b)
}

// waitServesOrExits waits until n serves a linearizable read or an exit
// was recorded.
func waitServesOrExits(t *testing.T, n *cluster.Node, exits *exitCodes) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, "node serves", func() error {
		if len(exits.get()) > 0 {
			return nil
		}
		ctx := ctxFor(t, time.Second)
		return n.LinearizableBarrier(ctx)
	})
}

// TestDamagedLastLogBatchStartsFromStore: a single node stopped cleanly
// (its store durable at the log's last entry), the last batch of its log
// damaged. The store holds every entry the log lost, so the node starts
// from the store, keeps every record, and takes new writes.
func TestDamagedLastLogBatchStartsFromStore(t *testing.T) {
	t.Parallel()
	cfg := soloConfig(t.TempDir(), testaddr.New(t).IP(1))
	n := openSolo(t, cfg)
	ctx := ctxFor(t, 30*time.Second)
	want := map[string][]byte{}
	for i := range 10 {
		key := fmt.Sprintf("k%d", i)
		want[key] = []byte("body " + key)
		if err := put(ctx, n, key, want[key]); err != nil {
			t.Fatal(err)
		}
	}
	digest := n.Machine().Digest()
	n.Close()
	flipInLastBatch(t, cfg.DataDir)

	var exits exitCodes
	n, err := cluster.Open(cluster.WithExitHook(cfg, exits.hook("solo")))
	if err != nil {
		t.Fatalf("open with a damaged last batch that the store holds: %v", err)
	}
	defer n.Close()
	waitServesOrExits(t, n, &exits)
	if codes := exits.get(); len(codes) > 0 {
		t.Fatalf("the node exited (%v) after starting with a damaged last batch the store holds", codes)
	}
	if got := n.Machine().Digest(); got != digest {
		t.Fatalf("digest %s after the restart, want %s", got, digest)
	}
	checkStored(t, n.Machine(), want)
	if err := put(ctx, n, "after", []byte("after")); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	n.Close()
	// And it starts again: the damage is gone with the log it reset.
	n = openSolo(t, cfg)
	want["after"] = []byte("after")
	checkStored(t, n.Machine(), want)
}

// TestDamagedLastLogBatchNotInStoreRefuses: the damaged batch holds
// entries the store never applied (they were appended, so this node may
// have acknowledged them, and were not yet applied durably). Dropping them
// silently would lose them; the node refuses to start, naming the first
// lost entry and the recovery.
func TestDamagedLastLogBatchNotInStoreRefuses(t *testing.T) {
	t.Parallel()
	cfg, last := soloAheadOfStore(t, testaddr.New(t).IP(1))
	flipInLastBatch(t, cfg.DataDir)

	var exits exitCodes
	n, err := cluster.Open(cluster.WithExitHook(cfg, exits.hook("solo")))
	if err == nil {
		n.Close()
		t.Fatalf("the node started without log entries %d-%d, which it had appended and never applied (exits %v)",
			last+1, last+3, exits.get())
	}
	wantMsg := fmt.Sprintf("log entries %d-%d", last+1, last+3)
	if !errors.Is(err, cluster.ErrCorrupt) || !strings.Contains(err.Error(), wantMsg) ||
		!strings.Contains(err.Error(), "wipe the data dir and rejoin") {
		t.Fatalf("open: %v; want ErrCorrupt naming %q and the recovery", err, wantMsg)
	}
	t.Log(err)
}

// TestDamagedLastLogBatchCatchesUpFromPeers: a follower of three, stopped
// with its store durable, its last log batch damaged, restarts, takes the
// entries it lacks from the leader and converges on the same digest.
func TestDamagedLastLogBatchCatchesUpFromPeers(t *testing.T) {
	skipInShort(t, "crashes a node of a 3-node cluster and damages its log")
	var exits exitCodes
	c := testcluster.Start(t, 3, testcluster.Options{Tune: func(cfg *cluster.Config) {
		*cfg = cluster.WithExitHook(*cfg, exits.hook(cfg.NodeID))
	}})
	leader := c.WaitLeader(30 * time.Second)
	ctx := ctxFor(t, 60*time.Second)
	for i := range 20 {
		if err := put(ctx, leader.Node(), fmt.Sprintf("k%d", i), []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(30 * time.Second)
	var follower *testcluster.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			follower = nd
			break
		}
	}
	c.Crash(follower) // closes the node: its store is durable at the log's end
	flipInLastBatch(t, follower.DataDir)
	c.Restart(follower)
	for i := range 20 {
		if err := put(ctx, leader.Node(), fmt.Sprintf("after%d", i), []byte("after")); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "the follower catches up", func() error {
		if codes := exits.get(); len(codes) > 0 {
			t.Fatalf("a node exited: %v", codes)
		}
		want, got := leader.Node().Machine().Digest(), follower.Node().Machine().Digest()
		if got != want {
			return fmt.Errorf("follower digest %s, leader %s", got, want)
		}
		return nil
	})
	if codes := exits.get(); len(codes) > 0 {
		t.Fatalf("a node exited: %v", codes)
	}
}

// soloAheadOfStore is a closed single node whose log ends in a batch of
// three entries its store never applied; it returns the index before them.
func soloAheadOfStore(t *testing.T, ip string) (cluster.Config, uint64) {
	t.Helper()
	cfg := soloConfig(t.TempDir(), ip)
	n := openSolo(t, cfg)
	if err := put(ctxFor(t, 10*time.Second), n, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	applied := n.Machine().Applied()
	n.Close()
	return cfg, appendUnapplied(t, cfg, applied)
}

// appendUnapplied appends a batch of three entries after the store's
// applied index, as a log that ran ahead of the store's durable state
// holds them, and returns the index before them.
func appendUnapplied(t *testing.T, cfg cluster.Config, applied uint64) uint64 {
	t.Helper()
	w, err := raftwal.Open(filepath.Join(cfg.DataDir, "wal"), raftwal.WithSegmentSize(cfg.LogSegmentSize))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	last, err := w.LastIndex()
	if err != nil || last != applied {
		t.Fatalf("log ends at %d (%v), store at %d", last, err, applied)
	}
	var prev raft.Log
	if err := w.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(1); i <= 3; i++ {
		batch = append(batch, &raft.Log{Index: last + i, Term: prev.Term, Type: raft.LogNoop, Data: []byte("unapplied entry")})
	}
	if err := w.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	return last
}

// TestTornLastLogBatchStarts: a last batch a crash cut short (its commit
// frame never reached the disk) was never acknowledged: the node drops it
// and starts, as before, rather than refusing like a damaged one.
func TestTornLastLogBatchStarts(t *testing.T) {
	t.Parallel()
	cfg, _ := soloAheadOfStore(t, testaddr.New(t).IP(1))
	// Zero the last commit frame: the write was torn before it.
	path, b, end := tailWritten(t, cfg.DataDir)
	copy(b[end-7:end+1], make([]byte, 8))
	writeFile(t, path, b)
	n := openSolo(t, cfg)
	checkStored(t, n.Machine(), map[string][]byte{"k": []byte("v")})
}
