package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/google/btree"
)

// btreeDegree trades node size against depth; 32 is the library's sweet spot
// for small items.
const btreeDegree = 32

// keyed is an item of the key tree: a record and the hash of its key. The
// tree orders by hash first, so a lookup compares integers held in the tree
// nodes themselves and reads a record only to confirm the match. Ordered by
// the key strings, every comparison read a record from wherever it lay in
// memory and compared three strings: 7.5–11 µs a claim among 200 k records
// with random keys, now 3.6 µs (docs/PERFORMANCE.md).
type keyed struct {
	hash uint64
	rec  *Record
}

func cmpKeyed(a, b keyed) int {
	if c := cmp.Compare(a.hash, b.hash); c != 0 {
		return c
	}
	return a.rec.RecordKey.compare(b.rec.RecordKey)
}

func lessKeyed(a, b keyed) bool { return cmpKeyed(a, b) < 0 }

// expiring is an item of the expiry index: a record and when its TTL ends.
// The index orders by that time, ties broken by key, so Expire deletes in
// the same order on every node and in every version; the time sits in the
// item so that only ties read the records.
type expiring struct {
	at  int64
	rec *Record
}

func lessExpiring(a, b expiring) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.rec.RecordKey.compare(b.rec.RecordKey) < 0
}

// state is the replicated data: the records, an index by expiry, and FSM
// time. It has no lock of its own; Machine serialises access.
type state struct {
	now int64
	// applied is the index of the last log entry applied. It is kept with
	// the state (and in snapshots) so that a read of the state and of the
	// index it reflects is one atomic view; the digest leaves it out.
	applied uint64
	records *btree.BTreeG[keyed]
	expiry  *btree.BTreeG[expiring]
	// pending counts PENDING records (the rest are COMPLETED), kept on
	// every put and remove so metrics need no walk.
	pending int
	// usage is each tenant's count of records and bytes, for quotas
	// (quota.go); kept on every put and remove like pending.
	usage usageTable
}

func newState() *state {
	return &state{
		records: btree.NewG(btreeDegree, lessKeyed),
		expiry:  btree.NewG(btreeDegree, lessExpiring),
		usage:   usageTable{},
	}
}

// clone is O(1): the trees copy their nodes lazily on the next write, which
// is what makes Snapshot cheap while Apply continues. The clone leaves usage
// out (copying it is O(tenants)): clones are read-only views for snapshots
// and digests, and a restore recounts usage from the records.
func (s *state) clone() *state {
	return &state{now: s.now, applied: s.applied, records: s.records.Clone(), expiry: s.expiry.Clone(), pending: s.pending}
}

func (s *state) get(k RecordKey) (*Record, bool) {
	item, ok := s.byKey(k, s.records.Get)
	return item.rec, ok
}

// byKey runs op, a lookup or delete on the key tree, with an item that
// stands for k. The tree's comparator takes a record, so the item holds a
// probe record borrowed from a pool: a fresh one per lookup was 5 % of a
// follower's allocations. Reads look up concurrently, hence a pool.
func (s *state) byKey(k RecordKey, op func(keyed) (keyed, bool)) (keyed, bool) {
	probe := probes.Get().(*Record)
	probe.RecordKey = k
	item, ok := op(keyed{hash: k.hash(), rec: probe})
	probe.RecordKey = RecordKey{}
	probes.Put(probe)
	return item, ok
}

var probes = sync.Pool{New: func() any { return new(Record) }}

// live returns the record under k unless it is absent or past its TTL: a
// record that has expired but not yet been deleted by Expire is gone for
// every command and read.
func (s *state) live(k RecordKey) (*Record, bool) {
	r, ok := s.get(k)
	if !ok || r.ExpiresAt <= s.now {
		return nil, false
	}
	return r, true
}

// put stores r, replacing any record under the same key.
func (s *state) put(r *Record) {
	if old, ok := s.records.ReplaceOrInsert(keyed{hash: r.hash(), rec: r}); ok {
		s.dropIndexed(old.rec)
	}
	s.expiry.ReplaceOrInsert(expiring{at: r.ExpiresAt, rec: r})
	s.countPending(r, 1)
	s.usage.count(r, 1)
}

func (s *state) remove(k RecordKey) {
	if old, ok := s.byKey(k, s.records.Delete); ok {
		s.dropIndexed(old.rec)
	}
}

// load fills an empty state with recs, given in the expiry index's order
// (a snapshot's), and builds each tree in its own order so that both only
// ever append: inserting 1 M records into the key tree in hash order is a
// random walk through memory per record. A key given twice is an error.
func (s *state) load(recs []*Record) error {
	byKey := make([]keyed, len(recs))
	for i, r := range recs {
		s.expiry.ReplaceOrInsert(expiring{at: r.ExpiresAt, rec: r})
		s.countPending(r, 1)
		s.usage.count(r, 1)
		byKey[i] = keyed{hash: r.hash(), rec: r}
	}
	slices.SortFunc(byKey, cmpKeyed)
	for i, item := range byKey {
		if i > 0 && !lessKeyed(byKey[i-1], item) {
			return fmt.Errorf("%w: key %q/%q/%q stored twice", ErrMalformed, item.rec.Tenant, item.rec.Scope, item.rec.Key)
		}
		s.records.ReplaceOrInsert(item)
	}
	return nil
}

// dropIndexed takes old, just replaced or deleted in the key tree, out of
// the expiry index and the counts.
func (s *state) dropIndexed(old *Record) {
	s.expiry.Delete(expiring{at: old.ExpiresAt, rec: old})
	s.countPending(old, -1)
	s.usage.count(old, -1)
}

func (s *state) countPending(r *Record, delta int) {
	if r.State == StatePending {
		s.pending += delta
	}
}
