package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// TestKeyIndexCollisions drives the index with hashes drawn from a handful
// of values, so that most keys share a hash with another, and checks every
// answer against a plain map by key. Real 64-bit hashes almost never meet;
// this is the path that keeps them correct when they do.
func TestKeyIndexCollisions(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		x := newKeyIndex(0)
		want := map[RecordKey]*Record{}
		const keys, hashes = 40, 3
		hashOf := func(k RecordKey) uint64 { return uint64(len(k.Key)+int(k.Key[len(k.Key)-1])) % hashes }
		for step := range 2000 {
			k := RecordKey{Tenant: "t", Scope: "s", Key: fmt.Sprintf("k%d", rng.IntN(keys))}
			h := hashOf(k)
			switch rng.IntN(3) {
			case 0:
				r := &Record{RecordKey: k, Token: uint64(step)}
				old, replaced := x.put(r, h)
				if w, ok := want[k]; ok != replaced || old != w {
					t.Fatalf("seed %d step %d: put %v replaced (%v, %v), want (%v, %v)", seed, step, k, old, replaced, w, ok)
				}
				want[k] = r
			case 1:
				old, ok := x.remove(k, h)
				if w, wok := want[k]; ok != wok || old != w {
					t.Fatalf("seed %d step %d: remove %v gave (%v, %v), want (%v, %v)", seed, step, k, old, ok, w, wok)
				}
				delete(want, k)
			default:
				r, ok := x.get(k, h)
				if w, wok := want[k]; ok != wok || r != w {
					t.Fatalf("seed %d step %d: get %v gave (%v, %v), want (%v, %v)", seed, step, k, r, ok, w, wok)
				}
			}
			if x.len() != len(want) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, x.len(), len(want))
			}
			for h, chain := range x.collided {
				if len(chain) == 0 {
					t.Fatalf("seed %d step %d: an empty chain is left under hash %d", seed, step, h)
				}
				held, ok := x.byHash[h]
				for _, r := range chain {
					if !ok || hashOf(r.RecordKey) != h || r.RecordKey == held.RecordKey {
						t.Fatalf("seed %d step %d: collided %v is not beside another record of hash %d", seed, step, r.RecordKey, h)
					}
				}
			}
		}
	}
}

// TestPropertyCollidingHashesChangeNothing applies random command sequences
// with a hash under which three of the four keys collide, checks after every
// command that the key index and the expiry index hold the same records,
// and then replays the sequence with the real hash: every result, the
// digest and the snapshot must be the same, before and after a restore.
func TestPropertyCollidingHashesChangeNothing(t *testing.T) {
	seeded := keyHash
	t.Cleanup(func() { keyHash = seeded })
	colliding := func(k RecordKey) uint64 { return uint64(k.Key[len(k.Key)-1]) % 2 }
	rapid.Check(t, func(t *rapid.T) {
		keyHash = colliding
		g := &cmdGen{now: t0}
		m := NewMachine()
		var cmds []*Command
		var results []Result
		for i := range rapid.IntRange(1, 120).Draw(t, "steps") {
			c := g.command(t, true)
			res := m.Apply(uint64(i+1), c)
			if err := indexesAgree(m.st); err != nil {
				t.Fatalf("step %d (%v): %v", i, c.Type, err)
			}
			g.learn(res)
			cmds, results = append(cmds, c), append(results, res)
		}
		snap := snapshotBytes(t, m)
		back := restored(t, snap)
		if err := indexesAgree(back.st); err != nil {
			t.Fatalf("after restore: %v", err)
		}

		keyHash = seeded
		ref := NewMachine()
		for i, c := range cmds {
			if res := ref.Apply(uint64(i+1), c); !sameResult(res, results[i]) {
				t.Fatalf("step %d (%v): %+v with colliding hashes, %+v with real ones", i, c.Type, results[i], res)
			}
		}
		if ref.Digest() != m.Digest() || !bytes.Equal(snapshotBytes(t, ref), snap) {
			t.Fatalf("digest or snapshot differs between colliding and real hashes")
		}
	})
}

// indexesAgree checks that the key index holds exactly the records of the
// expiry index, each found under its own key.
func indexesAgree(s *state) error {
	if s.keys.len() != s.expiry.Len() {
		return fmt.Errorf("key index holds %d records, expiry index %d", s.keys.len(), s.expiry.Len())
	}
	var err error
	s.expiry.Ascend(func(item expiring) bool {
		if r, ok := s.get(item.rec.RecordKey); !ok || r != item.rec {
			err = fmt.Errorf("key %v: the key index has %p, the expiry index %p", item.rec.RecordKey, r, item.rec)
		}
		return err == nil
	})
	return err
}
