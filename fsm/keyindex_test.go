package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyIndexCollisions drives the index with hashes drawn from a handful
// of values, so that most keys share a hash with another, and checks every
// answer against a plain map by key. Real 64-bit hashes almost never meet;
// this is the path that keeps them correct when they do.
func TestKeyIndexCollisions(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		x := newKeyIndex()
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
