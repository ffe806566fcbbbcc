package cluster

import "sync"

// faultReporter holds the first fault the node cannot run past, for every
// caller of Fatal (the server's relay and a test may both wait on it). A
// storage fault goes to Config.OnFatal instead when there is one. It
// exists before the Node does: the store, opened first, reports through it
// too.
type faultReporter struct {
	onFatal func(error)
	once    sync.Once
	err     error
	// done is closed once err is set.
	done chan struct{}
}

func newFaultReporter(onFatal func(error)) *faultReporter {
	return &faultReporter{onFatal: onFatal, done: make(chan struct{})}
}

// report passes a storage fault to OnFatal, or else holds it as the fault.
func (r *faultReporter) report(err error) {
	if r.onFatal != nil {
		r.onFatal(err)
		return
	}
	r.hold(err)
}

// hold keeps err as the fault, unless there is one already: the caller
// stops the node at the first.
func (r *faultReporter) hold(err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
	})
}

// fault returns the fault held, nil while there is none.
func (r *faultReporter) fault() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// wait returns a channel that receives the fault once there is one; it
// never receives if stop closes first.
func (r *faultReporter) wait(stop <-chan struct{}) <-chan error {
	ch := make(chan error, 1)
	go func() {
		select {
		case <-r.done:
			ch <- r.err
		case <-stop:
		}
	}()
	return ch
}
