package store

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// keyFilter is a Bloom filter over record keys, in memory, of a size fixed
// by configuration. Most claims are of a fresh key that is stored nowhere,
// and answering that from the sstables' own filters still costs an
// iterator seek through every level (docs/PERFORMANCE.md): this answers it
// with one cache line. It never forgets a key added; a deleted key stays
// in it until the filter is rebuilt (filters.go), so it only ever answers
// "maybe" for too many keys, which costs a lookup, never a wrong outcome.
//
// The filter is blocked: all of a key's probes fall in one 512-bit block,
// one cache miss per lookup, at a slightly higher false-positive rate than
// a classic Bloom filter of the same size.
type keyFilter struct {
	seed  maphash.Seed
	words []uint64 // len is a multiple of blockWords; touched atomically
	// set counts the bits set, for the fill that decides a rebuild.
	set atomic.Int64
}

const (
	blockWords  = 8 // one cache line
	blockBits   = blockWords * 64
	filterProbe = 6 // probes per key: near the best for ~10 bits a key
)

// newKeyFilter returns an empty filter of about size bytes (at least one
// block).
func newKeyFilter(size int64) *keyFilter {
	blocks := max(size/(8*blockWords), 1)
	return &keyFilter{seed: maphash.MakeSeed(), words: make([]uint64, blocks*blockWords)}
}

// locate returns the first word of key's block and the start and step of
// its probes within the block. The block comes from the hash's high half;
// the bits from the low half, stepped as LevelDB's filter does (double
// hashing).
func (f *keyFilter) locate(key []byte) (base int, g, delta uint32) {
	h := maphash.Bytes(f.seed, key)
	blocks := uint64(len(f.words) / blockWords)
	g = uint32(h)
	return int((h>>32)*blocks>>32) * blockWords, g, g>>17 | g<<15
}

// add puts key in the filter; it is safe beside mayHold and other adds.
func (f *keyFilter) add(key []byte) {
	base, g, delta := f.locate(key)
	for range filterProbe {
		i, mask := base+int(g%blockBits/64), uint64(1)<<(g%64)
		if atomic.OrUint64(&f.words[i], mask)&mask == 0 {
			f.set.Add(1)
		}
		g += delta
	}
}

// mayHold is false only for a key never added.
func (f *keyFilter) mayHold(key []byte) bool {
	base, g, delta := f.locate(key)
	for range filterProbe {
		if atomic.LoadUint64(&f.words[base+int(g%blockBits/64)])&(1<<(g%64)) == 0 {
			return false
		}
		g += delta
	}
	return true
}

// fill is the fraction of bits set; a lookup of a key never added answers
// "maybe" with a probability near fill^filterProbe.
func (f *keyFilter) fill() float64 {
	return float64(f.set.Load()) / float64(len(f.words)*64)
}

// countSet recounts the bits set (for tests of set).
func (f *keyFilter) countSet() int64 {
	var n int
	for i := range f.words {
		n += bits.OnesCount64(atomic.LoadUint64(&f.words[i]))
	}
	return int64(n)
}
