package fsm

import (
	"fmt"

	"github.com/google/btree"
)

// btreeDegree trades node size against depth; 32 is the library's sweet spot
// for small items.
const btreeDegree = 32

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

// state is the replicated data: the records, indexed by key and by expiry,
// and FSM time. It has no lock of its own; Machine serialises access.
type state struct {
	now int64
	// applied is the index of the last log entry applied. It is kept with
	// the state (and in snapshots) so that a read of the state and of the
	// index it reflects is one atomic view; the digest leaves it out.
	applied uint64
	// keys finds records by key; it is nil in a view (clone), which is only
	// ever walked, in the expiry index's order.
	keys *keyIndex
	// expiry holds every record once, ordered by expiry time then key.
	expiry *btree.BTreeG[expiring]
	// pending counts PENDING records (the rest are COMPLETED), kept on
	// every put and remove so metrics need no walk.
	pending int
	// usage is each tenant's count of records and bytes, for quotas
	// (quota.go); kept on every put and remove like pending.
	usage usageTable
}

func newState() *state {
	return &state{
		keys:   newKeyIndex(0),
		expiry: btree.NewG(btreeDegree, lessExpiring),
		usage:  usageTable{},
	}
}

// clone is O(1): the expiry tree copies its nodes lazily on the next write,
// which is what makes Snapshot cheap while Apply continues. The clone is a
// read-only view for snapshots and digests, which walk the expiry index
// only, so it leaves the key index out, and usage too (copying it is
// O(tenants)); a restore recounts usage from the records.
func (s *state) clone() *state {
	return &state{now: s.now, applied: s.applied, expiry: s.expiry.Clone(), pending: s.pending}
}

// len is the number of stored records: each is in the expiry index once.
func (s *state) len() int { return s.expiry.Len() }

func (s *state) get(k RecordKey) (*Record, bool) { return s.keys.get(k, k.hash()) }

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
	if old, ok := s.keys.put(r, r.hash()); ok {
		s.dropIndexed(old)
	}
	s.expiry.ReplaceOrInsert(expiring{at: r.ExpiresAt, rec: r})
	s.countPending(r, 1)
	s.usage.count(r, 1)
}

func (s *state) remove(k RecordKey) {
	if old, ok := s.keys.remove(k, k.hash()); ok {
		s.dropIndexed(old)
	}
}

// load fills an empty state with recs, usually given in the expiry index's
// order (a format 2 snapshot's), so the expiry index only appends; format 1
// comes in key order, which the tree takes too, only slower. A key given
// twice is an error.
func (s *state) load(recs []*Record) error {
	s.keys = newKeyIndex(len(recs))
	for _, r := range recs {
		if _, dup := s.keys.put(r, r.hash()); dup {
			return fmt.Errorf("%w: key %q/%q/%q stored twice", ErrMalformed, r.Tenant, r.Scope, r.Key)
		}
		s.expiry.ReplaceOrInsert(expiring{at: r.ExpiresAt, rec: r})
		s.countPending(r, 1)
		s.usage.count(r, 1)
	}
	return nil
}

// dropIndexed takes old, just replaced or deleted in the key index, out of
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
