package fsm

import "sync"

// watchers wakes goroutines waiting for a key to change. It is outside the
// replicated state: waking a waiter changes nothing that Apply returns.
type watchers struct {
	// mu guards byKey. It is its own lock, apart from the Machine's: a
	// commit notifies after it publishes, and GetWatch registers before it
	// reads (machine.go says why that order loses no wake-up).
	mu    sync.Mutex
	byKey map[RecordKey]*watch
}

// watch is the channel every waiter on one key shares, and how many
// registrations hold it.
type watch struct {
	ch chan struct{}
	// n counts registrations not dropped, so a registration GetWatch did
	// not need (the record was not PENDING) takes its entry away again
	// unless another waiter still holds it.
	n int
}

// add registers a waiter on k and returns the watch whose channel is closed
// at the next change of k; every waiter on k shares one.
func (w *watchers) add(k RecordKey) *watch {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey == nil {
		w.byKey = make(map[RecordKey]*watch)
	}
	wt, ok := w.byKey[k]
	if !ok {
		wt = &watch{ch: make(chan struct{})}
		w.byKey[k] = wt
	}
	wt.n++
	return wt
}

// drop takes back a registration of add that nobody will wait on; the
// last one removes k's entry, unless a change closed it already.
func (w *watchers) drop(k RecordKey, wt *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.n--
	if wt.n == 0 && w.byKey[k] == wt {
		delete(w.byKey, k)
	}
}

func (w *watchers) notify(k RecordKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt, ok := w.byKey[k]; ok {
		close(wt.ch)
		delete(w.byKey, k)
	}
}

// notifyAll wakes every waiter; the order of closing does not matter.
func (w *watchers) notifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, wt := range w.byKey {
		close(wt.ch)
		delete(w.byKey, k)
	}
}

// Waiting returns how many keys have at least one waiter.
func (m *Machine) Waiting() int {
	m.watch.mu.Lock()
	defer m.watch.mu.Unlock()
	return len(m.watch.byKey)
}
