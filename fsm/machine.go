package fsm

import (
	"sync"
)

// Machine is the deterministic state machine. Apply must be called from one
// goroutine at a time (Raft's apply loop); reads may run concurrently.
type Machine struct {
	// mu guards st: Apply takes it for writing, reads for reading. Records
	// are immutable, so a reader may use a *Record after unlocking.
	mu sync.RWMutex
	st *state

	watch watchers
}

// NewMachine returns an empty state machine.
func NewMachine() *Machine {
	return &Machine{st: newState()}
}

// Apply applies one command decided at log entry index and returns its
// result. The result depends only on the state, the command and index.
func (m *Machine) Apply(index uint64, c *Command) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.applied = max(m.st.applied, index)
	if c.Type == TypeBatch {
		res := Result{Outcome: OutcomeOK, Batch: make([]Result, len(c.Batch))}
		for i, sub := range c.Batch {
			res.Batch[i] = m.applyOne(sub, TokenFor(index, i))
		}
		return res
	}
	return m.applyOne(c, TokenFor(index, 0))
}

// applyOne advances FSM time and dispatches to the command's handler. FSM
// time never goes backwards, so a new leader whose clock lags cannot revive
// an expired lease or record.
func (m *Machine) applyOne(c *Command, token uint64) Result {
	s := m.st
	s.now = max(s.now, c.Now)
	var res Result
	switch c.Type {
	case TypeClaim:
		res = s.applyClaim(c, token)
	case TypeComplete:
		res = s.applyComplete(c)
	case TypeRelease:
		res = s.applyRelease(c)
	case TypeExtend:
		res = s.applyExtend(c)
	case TypeExpire:
		return s.applyExpire(c, m.watch.notify)
	default:
		// Decoding refuses unknown types and nested batches, so only a
		// caller bug gets here; answering keeps every node identical.
		return Result{Outcome: OutcomeUnknown}
	}
	if res.Outcome == OutcomeOK || res.Outcome == OutcomeWon {
		m.watch.notify(c.Key)
	}
	return res
}

// MarkApplied records that the log entry at index was applied without a
// command for the state machine (a configuration change).
func (m *Machine) MarkApplied(index uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.applied = max(m.st.applied, index)
}

// Applied returns the index of the last log entry applied.
func (m *Machine) Applied() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.applied
}

// Get returns the live record under k, as of the last applied command.
func (m *Machine) Get(k RecordKey) (*Record, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.live(k)
}

// GetWatch returns the live record under k and, when it is PENDING, a
// channel that is closed at the next change of k (nil otherwise). Reading and
// registering under one lock means no change can slip between the two. Only
// PENDING records are watched because only they are sure to change again
// (complete, release or TTL), which bounds the watch table.
func (m *Machine) GetWatch(k RecordKey) (*Record, bool, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.st.live(k)
	if !ok || r.State != StatePending {
		return r, ok, nil
	}
	return r, ok, m.watch.add(k)
}

// Len returns the number of stored records, expired ones not yet deleted included.
func (m *Machine) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.len()
}

// Counts returns how many stored records are PENDING and COMPLETED
// (expired ones not yet deleted included).
func (m *Machine) Counts() (pending, completed int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.pending, m.st.len() - m.st.pending
}

// Now returns FSM time in Unix nanoseconds.
func (m *Machine) Now() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.now
}

// NextExpiry returns the earliest ExpiresAt of any stored record, so the
// leader proposes Expire only when there is something to expire.
func (m *Machine) NextExpiry() (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.st.expiry.Min()
	if !ok {
		return 0, false
	}
	return e.at, true
}

// view returns an immutable copy of the state for snapshots and digests.
func (m *Machine) view() *state {
	// Clone writes to the trees' copy-on-write bookkeeping, so it needs the
	// write lock even though it changes no record.
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.clone()
}

// swap replaces the whole state (Restore) and wakes every watcher, since any
// key may have changed.
func (m *Machine) swap(s *state) {
	m.mu.Lock()
	m.st = s
	m.mu.Unlock()
	m.watch.notifyAll()
}
