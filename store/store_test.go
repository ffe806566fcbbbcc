package store

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/idemnode/idemnode/fsm"
)

// The differential test: the same random log applied to a Machine over the
// Pebble store and one over the in-memory reference model gives the same
// results, digests and snapshot bytes, with restarts, snapshot restores and
// crashes of the Pebble store in the middle.

var (
	sec     = int64(time.Second)
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	keys    = []fsm.RecordKey{{Tenant: "t1", Scope: "POST /a", Key: "k1"}, {Tenant: "t1", Scope: "POST /a", Key: "k2"}, {Tenant: "t1", Scope: "POST /b", Key: "k\x001"}, {Tenant: "t2", Scope: "POST /a", Key: "k1"}}
	owners  = []string{"o1", "o2", "o3"}
	fps     = [][]byte{[]byte("f1"), []byte("f1"), []byte("f2")}
	leases  = []int64{0, 1 * sec, 30 * sec}
	ttls    = []int64{0, 60 * sec, 300 * sec}
	bodies  = [][]byte{nil, []byte("ok"), bytes.Repeat([]byte("x"), 3000)}
	quotas  = []fsm.Quota{{}, {}, {Keys: 2}, {Bytes: 40}}
	mustNot = func(err error) {
		if err != nil {
			panic(err)
		}
	}
)

type gen struct {
	now    int64
	tokens []uint64
}

func (g *gen) command(t *rapid.T, top bool) *fsm.Command {
	g.now += rapid.Int64Range(-10*sec, 90*sec).Draw(t, "dt")
	c := &fsm.Command{Now: g.now, Key: rapid.SampledFrom(keys).Draw(t, "key")}
	switch kind := rapid.IntRange(0, 9).Draw(t, "kind"); {
	case kind < 4:
		c.Type, c.Owner = fsm.TypeClaim, rapid.SampledFrom(owners).Draw(t, "owner")
		c.Fingerprint = rapid.SampledFrom(fps).Draw(t, "fp")
		c.Lease, c.TTL = rapid.SampledFrom(leases).Draw(t, "lease"), rapid.SampledFrom(ttls).Draw(t, "ttl")
		c.Quota = rapid.SampledFrom(quotas).Draw(t, "quota")
		c.WatchAbandon = rapid.Bool().Draw(t, "watch")
	case kind < 6:
		c.Type, c.Token = fsm.TypeComplete, g.token(t)
		c.Response = &fsm.Response{Status: 200, Body: rapid.SampledFrom(bodies).Draw(t, "body")}
		c.Quota = rapid.SampledFrom(quotas).Draw(t, "quota")
	case kind == 6:
		c.Type, c.Token = fsm.TypeRelease, g.token(t)
	case kind == 7:
		c.Type, c.Token, c.Lease = fsm.TypeExtend, g.token(t), rapid.SampledFrom(leases).Draw(t, "lease")
	case kind == 8 || !top:
		c = &fsm.Command{Type: fsm.TypeExpire, Now: g.now, Limit: uint32(rapid.IntRange(0, 3).Draw(t, "limit"))}
	default:
		c = &fsm.Command{Type: fsm.TypeBatch, Now: g.now}
		for range rapid.IntRange(0, 5).Draw(t, "batchLen") {
			c.Batch = append(c.Batch, g.command(t, false))
		}
	}
	return c
}

func (g *gen) token(t *rapid.T) uint64 {
	if len(g.tokens) > 0 && rapid.IntRange(0, 4).Draw(t, "realToken") > 0 {
		return rapid.SampledFrom(g.tokens).Draw(t, "token")
	}
	return rapid.Uint64Range(0, 1<<20).Draw(t, "token")
}

func (g *gen) learn(res fsm.Result) {
	if res.Outcome == fsm.OutcomeWon {
		g.tokens = append(g.tokens, res.Record.Token)
	}
	for _, sub := range res.Batch {
		g.learn(sub)
	}
}

func sameResult(a, b fsm.Result) bool {
	if a.Outcome != b.Outcome || a.Expired != b.Expired || a.Abandoned != b.Abandoned || len(a.Batch) != len(b.Batch) || (a.Record == nil) != (b.Record == nil) {
		return false
	}
	if a.Record != nil && !bytes.Equal(fsm.EncodeRecord(a.Record), fsm.EncodeRecord(b.Record)) {
		return false
	}
	for i := range a.Batch {
		if !sameResult(a.Batch[i], b.Batch[i]) {
			return false
		}
	}
	return true
}

// node is a Machine over a Pebble store on a crashable in-memory disk.
type node struct {
	fs *vfs.MemFS
	m  *fsm.Machine
}

func openNode(t testing.TB, fs *vfs.MemFS) *node {
	// Each handed batch stays in flight for a while, so that the next
	// steps' commits, lookups, expiries and snapshots run beside it; a few
	// records due soon are kept in memory, so Due takes some from there
	// and reads the others.
	s, err := Open("fsm", Options{FS: fs, CacheSize: 1 << 20, MemTableSize: 1 << 20, flushEvery: 8 << 10, dueSoonSize: 600,
		drainEvery: 4 << 10, ownSetKeys: 1, walkChunk: 1, KeyFilterSize: 4 << 10, beforeHandedCommit: func() { time.Sleep(time.Millisecond) }})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	m, err := fsm.New(s)
	if err != nil {
		t.Fatalf("machine: %v", err)
	}
	return &node{fs: fs, m: m}
}

func snapshot(t testing.TB, m *fsm.Machine) []byte {
	var buf bytes.Buffer
	if err := m.WriteSnapshot(&buf); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return buf.Bytes()
}

func TestDifferentialPebbleAgainstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := &gen{now: t0}
		model, err := fsm.New(fsm.NewMemStore())
		mustNot(err)
		n := openNode(t, vfs.NewCrashableMem())
		defer func() { n.m.Close() }()
		var index uint64
		var log []fsm.Entry
		for i := range rapid.IntRange(1, 120).Draw(rt, "steps") {
			switch rapid.IntRange(0, 19).Draw(rt, "event") {
			case 0: // a clean restart
				mustNot(n.m.Close())
				n = openNode(t, n.fs)
			case 1: // a snapshot installed from the model's stream
				mustNot(n.m.Restore(bytes.NewReader(snapshot(t, model))))
			case 2: // a crash after a sync: the store comes back at some commit, the log replays the rest
				if rapid.Bool().Draw(rt, "sync") {
					mustNot(n.m.Sync())
				}
				crashed := n.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
				old := n
				n = openNode(t, crashed)
				old.m.Close()
				n.m.ApplyEntries(log)
			}
			c := g.command(rt, true)
			index += uint64(rapid.IntRange(1, 2).Draw(rt, "gap"))
			e := fsm.Entry{Index: index, Term: 1, Cmd: c}
			log = append(log, e)
			want := model.ApplyEntries([]fsm.Entry{e})[0]
			got := n.m.ApplyEntries([]fsm.Entry{e})[0]
			if !sameResult(want, got) {
				rt.Fatalf("step %d (%v at %d): pebble %+v, model %+v", i, c.Type, index, got, want)
			}
			g.learn(want)
			if model.Digest() != n.m.Digest() {
				rt.Fatalf("step %d: digests differ", i)
			}
			mn, mok := model.NextExpiry()
			if pn, pok := n.m.NextExpiry(); pn != mn || pok != mok {
				rt.Fatalf("step %d: next expiry %d %v, model %d %v", i, pn, pok, mn, mok)
			}
		}
		if !bytes.Equal(snapshot(t, model), snapshot(t, n.m)) || model.Meta().StreamBytes != n.m.Meta().StreamBytes {
			rt.Fatal("snapshot streams differ")
		}
	})
}

// TestCrashKeepsAPrefixOfCommits: commits are not synced, so a crash may
// lose the latest, but the store always comes back at exactly the state of
// one earlier commit (its records match its applied index), and after a
// Sync never earlier than the Sync.
func TestCrashKeepsAPrefixOfCommits(t *testing.T) {
	fs := vfs.NewCrashableMem()
	n := openNode(t, fs)
	digests := map[uint64]string{0: n.m.Digest()}
	body := bytes.Repeat([]byte("r"), 2000) // memtables of 1 MiB fill and flush on their own
	var synced uint64
	for i := uint64(1); i <= 3000; i++ {
		k := fsm.RecordKey{Tenant: "t", Scope: "s", Key: fmt.Sprintf("key-%05d", i)}
		n.m.Apply(i, &fsm.Command{Type: fsm.TypeClaim, Now: t0, Key: k, Owner: "o", Lease: sec, TTL: 600 * sec,
			Fingerprint: body})
		digests[i] = n.m.Digest()
		if i == 1200 {
			mustNot(n.m.Sync())
			synced = i
		}
		if i%500 == 0 {
			back := openNode(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
			applied, digest := back.m.DigestAt()
			if digest != digests[applied] || applied < synced || back.m.Len() != int(applied) {
				t.Fatalf("after %d commits (synced %d) the crashed store is at %d with %d records, digest match %v",
					i, synced, applied, back.m.Len(), digest == digests[applied])
			}
			back.m.Close()
		}
	}
	n.m.Close()
}

// TestMemoryBoundCountsEachPart: the bound a node checks --memory-limit
// against grows with each setting by as many of it as the store holds.
func TestMemoryBoundCountsEachPart(t *testing.T) {
	base := Options{}.MemoryBound()
	const mib = 1 << 20
	if want := int64(128*mib + 4*32*mib + 2*(20*mib+20*mib/4) + 2*32*mib + 32*mib + 4*256<<10); base != want {
		t.Fatalf("default bound %d MiB, want %d MiB", base/mib, want/mib)
	}
	for _, tc := range []struct {
		name string
		o    Options
		more int64
	}{
		{"cache", Options{CacheSize: 256 * mib}, 128 * mib},
		{"memtables and the batches they size", Options{MemTableSize: 64 * mib}, 4*32*mib + 2*(20*mib+20*mib/4)},
		{"two filters", Options{KeyFilterSize: 64 * mib}, 2 * 32 * mib},
		{"no filter", Options{KeyFilterSize: -1}, -2 * 32 * mib},
		{"records due soon", Options{dueSoonSize: 48 * mib}, 16 * mib},
		{"none due soon", Options{dueSoonSize: -1}, -32 * mib},
	} {
		if got := tc.o.MemoryBound() - base; got != tc.more {
			t.Errorf("%s: bound grows by %d bytes, want %d", tc.name, got, tc.more)
		}
	}
}
