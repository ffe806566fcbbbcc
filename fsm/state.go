package fsm

import "github.com/google/btree"

// btreeDegree trades node size against depth; 32 is the library's sweet spot
// for small items.
const btreeDegree = 32

func lessRecord(a, b *Record) bool { return a.RecordKey.compare(b.RecordKey) < 0 }

// lessExpiry orders records by when their TTL ends, ties broken by key, so
// Expire deletes in the same order on every node. The expiry index holds the
// same *Record pointers as the main tree (8 bytes an item) rather than a copy
// of the key and time (56 bytes an item): records are immutable, so the
// fields it orders by never change under it.
func lessExpiry(a, b *Record) bool {
	if a.ExpiresAt != b.ExpiresAt {
		return a.ExpiresAt < b.ExpiresAt
	}
	return lessRecord(a, b)
}

// state is the replicated data: the records, an index by expiry, and FSM
// time. It has no lock of its own; Machine serialises access.
type state struct {
	now int64
	// applied is the index of the last log entry applied. It is kept with
	// the state (and in snapshots) so that a read of the state and of the
	// index it reflects is one atomic view; the digest leaves it out.
	applied uint64
	records *btree.BTreeG[*Record]
	expiry  *btree.BTreeG[*Record]
	// pending counts PENDING records (the rest are COMPLETED), kept on
	// every put and remove so metrics need no walk.
	pending int
	// usage is each tenant's count of records and bytes, for quotas
	// (quota.go); kept on every put and remove like pending.
	usage usageTable
}

func newState() *state {
	return &state{
		records: btree.NewG(btreeDegree, lessRecord),
		expiry:  btree.NewG(btreeDegree, lessExpiry),
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
	return s.records.Get(&Record{RecordKey: k})
}

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
	if old, ok := s.records.ReplaceOrInsert(r); ok {
		s.expiry.Delete(old)
		s.countPending(old, -1)
		s.usage.count(old, -1)
	}
	s.expiry.ReplaceOrInsert(r)
	s.countPending(r, 1)
	s.usage.count(r, 1)
}

func (s *state) remove(k RecordKey) {
	if old, ok := s.records.Delete(&Record{RecordKey: k}); ok {
		s.expiry.Delete(old)
		s.countPending(old, -1)
		s.usage.count(old, -1)
	}
}

func (s *state) countPending(r *Record, delta int) {
	if r.State == StatePending {
		s.pending += delta
	}
}
