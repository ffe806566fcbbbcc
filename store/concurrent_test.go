package store

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestConcurrentReadersKeepTheStoreDeterministic applies a long random log
// to a Machine over the Pebble store and to one over the reference model,
// while other goroutines do what a node's do beside its apply loop: the
// leader's ticker asks NextExpiry, feed watchers read Events, clients Get,
// a follower's InstallSnapshot streams a View, and raft's snapshots Sync.
// The differential test runs all of that on the applying goroutine, where
// none of the store's races can happen. The store's state is node-local
// (expLow, the buffer's maps, the records due soon, the key filter, the
// unflushed tracker): a reader that moves any of it wrongly makes this
// replica decide differently from the others, which the digests show.
//
// IDEMNODE_STRESS_ROUNDS runs more rounds (seeds) than the default.
func TestConcurrentReadersKeepTheStoreDeterministic(t *testing.T) {
	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("IDEMNODE_STRESS_ROUNDS")); err == nil {
		rounds = v
	}
	base := rand.Uint64()
	for r := range rounds {
		seed := base + uint64(r)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { concurrentRound(t, seed, 1500) })
	}
}

// stressKeys are enough keys that records pile up in Pebble across
// flushes, and few enough that claims meet stored records.
func stressKeys() []fsm.RecordKey {
	var out []fsm.RecordKey
	for i := range 48 {
		out = append(out, fsm.RecordKey{Tenant: fmt.Sprintf("t%d", i%3), Scope: "POST /pay", Key: fmt.Sprintf("k%02d", i)})
	}
	return out
}

// stressGen draws commands from its own random source, over stressKeys;
// gen keeps FSM time and the tokens won (learn).
type stressGen struct {
	gen
	rng  *rand.Rand
	keys []fsm.RecordKey
}

func (g *stressGen) command(top bool) *fsm.Command {
	g.now += g.rng.Int64N(1500 * int64(1e6)) // up to 1.5 s a step: leases end, TTLs pass
	c := &fsm.Command{Now: g.now, Key: g.keys[g.rng.IntN(len(g.keys))]}
	switch kind := g.rng.IntN(20); {
	case kind < 8:
		c.Type, c.Owner = fsm.TypeClaim, owners[g.rng.IntN(len(owners))]
		c.Fingerprint = fps[g.rng.IntN(len(fps))]
		c.Lease = int64(1+g.rng.IntN(4)) * sec
		c.TTL = int64(5+g.rng.IntN(40)) * sec
		c.WatchAbandon = g.rng.IntN(4) > 0
	case kind < 12:
		c.Type, c.Token = fsm.TypeComplete, g.token()
		c.Response = &fsm.Response{Status: 200, Body: bodies[g.rng.IntN(len(bodies))]}
	case kind == 12:
		c.Type, c.Token = fsm.TypeRelease, g.token()
	case kind == 13:
		c.Type, c.Token, c.Lease = fsm.TypeExtend, g.token(), int64(1+g.rng.IntN(4))*sec
	case kind == 14:
		c.Type, c.Token = fsm.TypeCheckpoint, g.token()
		c.Checkpoint = &fsm.Checkpoint{Point: "charged", Data: []byte("x")}
	case kind < 18 || !top:
		c = &fsm.Command{Type: fsm.TypeExpire, Now: g.now, Limit: uint32(g.rng.IntN(6))}
	default:
		c = &fsm.Command{Type: fsm.TypeBatch, Now: g.now}
		for range g.rng.IntN(6) {
			c.Batch = append(c.Batch, g.command(false))
		}
	}
	return c
}

func (g *stressGen) token() uint64 {
	if len(g.tokens) > 0 && g.rng.IntN(5) > 0 {
		return g.tokens[len(g.tokens)-1-g.rng.IntN(min(len(g.tokens), 30))]
	}
	return g.rng.Uint64N(1 << 20)
}

// readers runs the node's other goroutines against m until stop.
func readers(t *testing.T, m *fsm.Machine, keys []fsm.RecordKey, seed uint64, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	var stream uint64
	loop := func(every func(rng *rand.Rand)) {
		wg.Add(1)
		stream++
		rng := rand.New(rand.NewPCG(seed, stream))
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				every(rng)
			}
		}()
	}
	loop(func(*rand.Rand) { m.NextExpiry() })
	loop(func(rng *rand.Rand) { m.Get(keys[rng.IntN(len(keys))]) })
	loop(func(rng *rand.Rand) {
		if _, err := m.Events(m.Meta().Feed.PrunedThrough+uint64(rng.IntN(4)), 1+rng.IntN(8)); err != nil {
			t.Errorf("events: %v", err)
		}
	})
	loop(func(rng *rand.Rand) {
		if rng.IntN(2) == 0 {
			if err := m.WriteSnapshot(io.Discard); err != nil {
				t.Errorf("view: %v", err)
			}
			return
		}
		if err := m.Sync(); err != nil {
			t.Errorf("sync: %v", err)
		}
	})
	return &wg
}

func concurrentRound(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	g := &stressGen{gen: gen{now: t0}, rng: rng, keys: stressKeys()}
	model, err := fsm.New(fsm.NewMemStore())
	mustNot(err)
	n := openNode(t, vfs.NewCrashableMem())
	var log []fsm.Entry
	var index uint64
	for step := 0; step < steps; {
		stop := make(chan struct{})
		wg := readers(t, n.m, g.keys, seed+uint64(step), stop)
		for epoch := 50 + rng.IntN(250); epoch > 0 && step < steps; epoch-- {
			var entries []fsm.Entry
			for range 1 + rng.IntN(4) {
				index++
				entries = append(entries, fsm.Entry{Index: index, Term: 1, Cmd: g.command(true)})
			}
			log = append(log, entries...)
			want := model.ApplyEntries(entries)
			got := n.m.ApplyEntries(entries)
			for i := range entries {
				if !sameResult(want[i], got[i]) {
					close(stop)
					wg.Wait()
					t.Fatalf("seed %d step %d entry %d (%v): pebble %+v, model %+v", seed, step, entries[i].Index, entries[i].Cmd.Type, got[i], want[i])
				}
				g.learn(want[i])
			}
			if model.Digest() != n.m.Digest() {
				close(stop)
				wg.Wait()
				t.Fatalf("seed %d step %d: digests differ at %d", seed, step, index)
			}
			step++
		}
		close(stop)
		wg.Wait()
		switch rng.IntN(4) {
		case 0: // a clean restart
			mustNot(n.m.Close())
			n = openNode(t, n.fs)
		case 1: // a crash: the store comes back at some commit, the log replays the rest
			crashed := n.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			old := n
			n = openNode(t, crashed)
			old.m.Close()
			n.m.ApplyEntries(log)
		case 2: // an InstallSnapshot from the model's state
			mustNot(n.m.Restore(bytes.NewReader(snapshot(t, model))))
		}
	}
	if !bytes.Equal(snapshot(t, model), snapshot(t, n.m)) {
		t.Fatalf("seed %d: snapshot streams differ", seed)
	}
	n.m.Close()
}
