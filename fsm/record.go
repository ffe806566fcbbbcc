package fsm

import "strings"

// State is the lifecycle state of a record.
type State uint8

const (
	// StateUnknown is the zero value; no stored record has it.
	StateUnknown State = iota
	// StatePending means a holder is executing the side effect.
	StatePending
	// StateCompleted means a response is stored and is replayed to every retry.
	StateCompleted
)

// String returns the lower-case name of the state.
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateCompleted:
		return "completed"
	default:
		return "unknown"
	}
}

// RecordKey addresses a record: the same key under two scopes or two
// tenants is two records.
type RecordKey struct {
	Tenant string
	Scope  string
	Key    string
}

// compare orders keys by tenant, scope, then key. Every deterministic walk
// of the state (snapshot, digest, expiry ties) uses this order.
func (k RecordKey) compare(o RecordKey) int {
	if c := strings.Compare(k.Tenant, o.Tenant); c != 0 {
		return c
	}
	if c := strings.Compare(k.Scope, o.Scope); c != 0 {
		return c
	}
	return strings.Compare(k.Key, o.Key)
}

// Header is one response header line; headers are ordered and a name may repeat.
type Header struct {
	Name  string
	Value string
}

// Response is what the holder stored on completion, replayed byte for byte.
type Response struct {
	Status  int32
	Headers []Header
	Body    []byte
}

// Checkpoint is a recovery point a holder stored on its PENDING record: the
// name of the last step of a multi-step operation that is done, and what a
// holder taking the record over needs to resume after it (docs/API.md,
// "Recovery points").
type Checkpoint struct {
	Point string
	Data  []byte
}

// Record is one idempotency record. Records held by the Machine are
// immutable: every change stores a new *Record, so readers, watchers and
// snapshots may keep a pointer without a lock.
//
// The layout is kept small because a node holds every record in memory
// (see DESIGN.md, "Memory"): the key strings and Owner are substrings of one
// allocation (joinKey), and State sits beside Attempt so the struct packs
// into 144 bytes.
type Record struct {
	RecordKey
	Fingerprint []byte
	// Owner is the nonce of the claim attempt that holds (or held) the record.
	Owner string
	// Token is the fencing token of the winning claim (see TokenFor).
	Token   uint64
	Attempt uint32
	State   State
	// Times are FSM time in Unix nanoseconds.
	LeaseExpiresAt int64
	CreatedAt      int64
	ExpiresAt      int64
	CompletedAt    int64
	Response       *Response
	// Checkpoint is the last recovery point of a PENDING record, nil when
	// none; a completion drops it.
	Checkpoint *Checkpoint
	// TombstoneFor is how long the record stays a tombstone after its TTL
	// (nanoseconds; 0: none), as the leader stamped it into the command
	// that last claimed or completed it (--tombstone-ttl).
	TombstoneFor int64
	// Tombstone says Expire has cut the record down to its tombstone: the
	// response, owner and recovery point are gone. A record behaves as a
	// tombstone from ExpiresAt whether or not this is set yet.
	Tombstone bool
	// Watched says the claim that made (or took over) the record asked for
	// abandonment to be reported (abandon.go): while it is PENDING and held,
	// Expire marks it abandoned when its lease lapses.
	Watched bool
	// Abandoned is the number of the event that reported the record
	// abandoned, 0 when it is not abandoned now.
	Abandoned uint64
}

// deleteAt is when the record is gone for good: at the end of its TTL, or
// of its tombstone after that.
func (r *Record) deleteAt() int64 { return r.ExpiresAt + r.TombstoneFor }

// dueAt is when Expire next acts on the record, the time a store's expiry
// index keeps: at the end of the lease it marks a watched record abandoned,
// at ExpiresAt it cuts a record with a tombstone time down to its
// tombstone, at deleteAt it deletes it.
func (r *Record) dueAt() int64 {
	if r.awaitsAbandonment() {
		return r.LeaseExpiresAt // never after ExpiresAt: the TTL covers every lease
	}
	if r.TombstoneFor > 0 && !r.Tombstone {
		return r.ExpiresAt
	}
	return r.deleteAt()
}

// tombstoneAt reports whether the record is a tombstone at now: past its
// TTL, within its tombstone time.
func (r *Record) tombstoneAt(now int64) bool {
	return r.TombstoneFor > 0 && r.ExpiresAt <= now && now < r.deleteAt()
}

// tombstoneOf is what a tombstone keeps of r: the key, the fingerprint,
// the final state, the token and the times.
func tombstoneOf(r *Record) *Record {
	ts := *r
	ts.Owner, ts.Response, ts.Checkpoint, ts.Tombstone = "", nil, nil, true
	ts.Watched, ts.Abandoned = false, 0
	return &ts
}

// joinKey returns k and owner as substrings of one new string laid out
// tenant|scope|key|owner, so a stored record holds one allocation for them
// instead of four (and none of the command it came from).
func joinKey(k RecordKey, owner string) (RecordKey, string) {
	return splitKey(k.Tenant+k.Scope+k.Key+owner, len(k.Tenant), len(k.Scope), len(k.Key))
}

// splitKey cuts all, laid out tenant|scope|key|owner, into its parts.
func splitKey(all string, tenant, scope, key int) (RecordKey, string) {
	k := RecordKey{Tenant: all[:tenant], Scope: all[tenant : tenant+scope], Key: all[tenant+scope : tenant+scope+key]}
	return k, all[tenant+scope+key:]
}

// TokenFor returns the fencing token of the command at position pos of the
// batch in log entry index. Tokens are unique across the cluster and grow
// with the log, so a later claim always holds a larger token.
func TokenFor(index uint64, pos int) uint64 {
	return index<<16 | uint64(pos)
}

// MaxBatch is the most commands one Batch may hold: the position must fit
// the 16 low bits of a token.
const MaxBatch = 1 << 16
