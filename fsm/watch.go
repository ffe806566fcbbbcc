package fsm

import "sync"

// watchers wakes goroutines waiting for a key to change. It is outside the
// replicated state: waking a waiter changes nothing that Apply returns.
type watchers struct {
	// mu guards byKey; Apply notifies under the Machine's write lock and
	// readers add under its read lock, so watchers needs its own lock.
	mu    sync.Mutex
	byKey map[RecordKey]chan struct{}
}

// add returns the channel closed at the next change of k; every waiter on k
// shares one channel.
func (w *watchers) add(k RecordKey) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey == nil {
		w.byKey = make(map[RecordKey]chan struct{})
	}
	ch, ok := w.byKey[k]
	if !ok {
		ch = make(chan struct{})
		w.byKey[k] = ch
	}
	return ch
}

func (w *watchers) notify(k RecordKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.byKey[k]; ok {
		close(ch)
		delete(w.byKey, k)
	}
}

// notifyAll wakes every waiter; the order of closing does not matter.
func (w *watchers) notifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, ch := range w.byKey {
		close(ch)
		delete(w.byKey, k)
	}
}

// Waiting returns how many keys have at least one waiter.
func (m *Machine) Waiting() int {
	m.watch.mu.Lock()
	defer m.watch.mu.Unlock()
	return len(m.watch.byKey)
}
