package fsm

// Store keeps the state machine's records and metadata as bytes; the
// Machine decides every outcome. The Machine hands a store one Changes per
// applied group of log entries, and reads records back by their ordered key
// (EncodeKey). Values are records in the snapshot stream's record encoding,
// so a view streams them without decoding.
//
// Contract:
//   - Commit is atomic: after a crash a store comes back holding exactly the
//     state of some earlier Commit (its Meta says which), never a torn one,
//     and never a later Commit without an earlier one. It need not be
//     durable: the Raft log is the write-ahead log, and entries after the
//     store's applied index are applied again at start.
//   - Sync makes every Commit so far durable. The cluster calls it before a
//     snapshot lets Raft drop the log below an index (FSM.Snapshot).
//   - Reads see the last Commit. A store is safe for concurrent reads; one
//     goroutine commits.
//   - An error from a store is a fault of the disk or the store, never an
//     answer: the Machine panics rather than decide on it.
type Store interface {
	// Get returns the encoded record under key, or false.
	Get(key []byte) ([]byte, bool, error)
	// Due returns at most limit encoded records whose due time (the time
	// each RecordChange names: when Expire next acts on the record) is at
	// or before t, in (due time, key) order.
	Due(t int64, limit int) ([][]byte, error)
	// Events returns at most limit encoded events numbered above after, in
	// order (the abandoned feed, abandon.go).
	Events(after uint64, limit int) ([][]byte, error)
	// NextExpiry returns the earliest due time of any record.
	NextExpiry() (int64, bool, error)
	// Meta returns the metadata of the last Commit, or of what was opened.
	Meta() Meta
	// Usages returns every tenant's usage as of the last Commit.
	Usages() (map[string]Usage, error)
	// Commit applies one group of changes and their metadata atomically.
	Commit(c *Changes) error
	// Sync makes every Commit so far durable.
	Sync() error
	// View returns a consistent point-in-time view: records and Meta of one
	// Commit. Close it when done.
	View() (View, error)
	// NewBuilder returns a builder of a fresh, empty store of the same kind,
	// for a snapshot restore.
	NewBuilder() (Builder, error)
	// Close releases the store.
	Close() error
}

// View is a point-in-time view of a store.
type View interface {
	// Meta is the metadata of the Commit the view shows.
	Meta() Meta
	// Records calls fn with every encoded record in key order. fn must not
	// keep enc after it returns.
	Records(fn func(enc []byte) error) error
	// Events calls fn with every encoded event in order of number. fn must
	// not keep enc after it returns.
	Events(fn func(enc []byte) error) error
	// Close releases the view.
	Close() error
}

// Builder fills a fresh store from a snapshot stream (ReadSnapshot) and
// then installs it in place of the store it came from.
type Builder interface {
	// Has reports whether key was put already (for streams not in key order).
	Has(key []byte) (bool, error)
	// Put adds a record; enc is only valid during the call.
	Put(key, enc []byte, expiresAt int64) error
	// PutEvent adds an event; enc is only valid during the call.
	PutEvent(seq uint64, enc []byte) error
	// Finish writes the metadata and usage and makes the whole store durable.
	Finish(m Meta, usage map[string]Usage) error
	// Install makes the finished store the current one, durably (a crash
	// afterwards opens it), and opens it. The store it came from stays open
	// for its readers until closed.
	Install() (Store, error)
	// Abort discards the store being built.
	Abort()
}

// RecordChange is one record's change in a Commit: Old is what was stored
// (nil if nothing), New what is stored now (nil deletes it).
type RecordChange struct {
	// Key is the record's ordered key (EncodeKey).
	Key []byte
	// HadOld says a record was stored; OldExpiresAt was its due time
	// (Record.dueAt: its expiry, or its tombstone's end), so the store can
	// drop it from its expiry index; NewExpiresAt is the new record's.
	HadOld       bool
	OldExpiresAt int64
	// New is the encoded record now stored, nil when the record is deleted.
	New          []byte
	NewExpiresAt int64
}

// TenantUsage is one tenant's usage after a Commit; a zero Usage deletes it.
type TenantUsage struct {
	Tenant string
	Usage  Usage
}

// Changes is what one Commit writes: the group's net change of each record
// it touched and of each tenant's usage, each key at most once, so a store
// may write them in any order.
type Changes struct {
	Meta    Meta
	Records []RecordChange
	Usage   []TenantUsage
	Events  []EventChange
}

// EventChange adds the event numbered Seq (encoded as New) or, New nil,
// prunes it.
type EventChange struct {
	Seq uint64
	New []byte
}
