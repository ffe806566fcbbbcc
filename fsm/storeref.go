package fsm

import "sync"

// storeRef is the current store and the reads running on it outside the
// Machine's lock.
//
// Reads (Get, GetWatch, Tombstone, Events, NextExpiry, View) take the
// store and the metadata under the Machine's lock and read the store after
// releasing it: a disk read never holds up the apply goroutine's publish,
// nor the readers queued behind that publish (sync.RWMutex lets no new
// reader in while a writer waits).
//
// Such a read may see a later commit than the metadata it took: the apply
// goroutine commits to the store before it publishes, and may commit again
// meanwhile. For the one key read, the answer is still that of the log at a
// point between the two. A record the read finds was either unchanged since
// that metadata, and is judged at its FSM time, or written by a later
// command, at a later FSM time. Every record a command writes is live at
// that command's FSM time or cut down to a tombstone
// (TestWrittenRecordsAreLiveOrCutDown), liveness only ends as time grows,
// and the read-side checks (liveAt, tombstoneAtRead) take a cut-down record
// as past its TTL at any time: so judged at the earlier time the record is
// answered as right after the command that wrote it. (That point may lie
// inside a batch or a group of entries committed together: a later command
// of the group may have moved FSM time past the record's TTL.)
type storeRef struct {
	Store
	// readers is held for reading by every read of the store outside the
	// Machine's lock, and for writing around closing the store (Install,
	// Close), so a store is never closed under a read. Only a store
	// already replaced, or a Machine being closed, ever waits on it.
	readers sync.RWMutex
}

// reading returns the current store, held for reading (call done when
// finished with it), and the metadata of the last commit published.
func (m *Machine) reading() (s *storeRef, meta Meta) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	// Taken under mu: once Install has swapped the store, nobody can start
	// a read of the old one, so its closing waits only for reads started
	// before.
	m.cur.readers.RLock()
	return m.cur, m.meta
}

// done ends a read that reading started.
func (s *storeRef) done() { s.readers.RUnlock() }

// close closes the store once the reads running on it are done.
func (s *storeRef) close() error {
	s.readers.Lock()
	defer s.readers.Unlock()
	return s.Close()
}

// liveAt reports whether r, read outside the lock, is live at now. A cut-down
// tombstone is past its TTL by construction: a read may judge one written
// by a later commit at an earlier time (storeRef).
func liveAt(r *Record, now int64) bool {
	return r != nil && !r.Tombstone && r.ExpiresAt > now
}

// tombstoneAtRead reports whether r, read outside the lock, is a tombstone
// at now; like liveAt, a cut-down record is past its TTL whatever now says.
func tombstoneAtRead(r *Record, now int64) bool {
	return r != nil && r.TombstoneFor > 0 && (r.Tombstone || r.ExpiresAt <= now) && now < r.deleteAt()
}
