package fsm

// keyIndex finds a record by its key: a hash map from the key's hash to the
// record, and beside it the records whose hash another record already holds.
//
// It replaced a B-tree ordered by hash. Nothing walks the index — snapshots,
// digests and Expire walk the expiry index — and snapshots clone only the
// expiry index, so the index needs neither order nor cheap clones. A tree
// lookup among 150 k records missed the CPU cache a dozen times and was the
// largest part of applying a command (docs/PERFORMANCE.md); a map lookup
// misses once or twice.
//
// The hash is seeded per process (RecordKey.hash), so no tenant can choose
// keys that share one, and two keys do so about once in 2^64 pairs;
// collided only keeps that case correct.
type keyIndex struct {
	byHash map[uint64]*Record
	// collided holds, by hash, the records whose hash the record in byHash
	// also has; every hash here is in byHash too. n counts its records.
	collided map[uint64][]*Record
	n        int
}

// newKeyIndex returns an empty index with room for size records.
func newKeyIndex(size int) *keyIndex {
	return &keyIndex{byHash: make(map[uint64]*Record, size)}
}

func (x *keyIndex) len() int { return len(x.byHash) + x.n }

// get returns the record stored under k, whose hash is h.
func (x *keyIndex) get(k RecordKey, h uint64) (*Record, bool) {
	r, ok := x.byHash[h]
	if !ok || r.RecordKey == k {
		return r, ok
	}
	for _, r := range x.collided[h] {
		if r.RecordKey == k {
			return r, true
		}
	}
	return nil, false
}

// put stores r, whose key hashes to h, and returns the record it replaced.
func (x *keyIndex) put(r *Record, h uint64) (old *Record, replaced bool) {
	held, ok := x.byHash[h]
	if !ok || held.RecordKey == r.RecordKey {
		x.byHash[h] = r
		return held, ok
	}
	chain := x.collided[h]
	for i, c := range chain {
		if c.RecordKey == r.RecordKey {
			chain[i] = r
			return c, true
		}
	}
	if x.collided == nil {
		x.collided = map[uint64][]*Record{}
	}
	x.collided[h] = append(chain, r)
	x.n++
	return nil, false
}

// remove deletes the record stored under k, whose hash is h, and returns it.
// When byHash held it, a record of the same hash moves up from collided.
func (x *keyIndex) remove(k RecordKey, h uint64) (*Record, bool) {
	held, ok := x.byHash[h]
	if !ok {
		return nil, false
	}
	chain := x.collided[h]
	at := -1
	if held.RecordKey == k {
		if len(chain) == 0 {
			delete(x.byHash, h)
			return held, true
		}
		x.byHash[h] = chain[len(chain)-1]
		at = len(chain) - 1
	} else {
		for i, c := range chain {
			if c.RecordKey == k {
				held, at = c, i
				break
			}
		}
		if at < 0 {
			return nil, false
		}
	}
	chain[at] = chain[len(chain)-1]
	chain[len(chain)-1] = nil
	if chain = chain[:len(chain)-1]; len(chain) == 0 {
		delete(x.collided, h)
	} else {
		x.collided[h] = chain
	}
	x.n--
	return held, true
}
