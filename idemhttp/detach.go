package idemhttp

import (
	"context"
	"sync"
)

// detach is the context Do runs with: the request's until the handler
// starts (a caller that leaves while the claim waits ends the wait), then
// one the caller's leaving no longer ends, so that Do keeps extending the
// lease while the handler works: a lapsed lease would let a retry take the
// key over and run the operation a second time.
type detach struct {
	req    context.Context
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
	mu     sync.Mutex // orders the caller's leaving against the handler's start
	// running: the handler started, and the caller's leaving is its alone.
	running bool
}

func newDetach(req context.Context) *detach {
	d := &detach{req: req}
	d.ctx, d.cancel = context.WithCancel(context.WithoutCancel(req))
	d.stop = context.AfterFunc(req, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.running {
			d.cancel()
		}
	})
	return d
}

// start is called first thing in the function Do runs, with its context.
// It returns the handler's context, which the caller's leaving cancels as
// net/http's would (and Do's, when the lease is lost), and its cancel
// function; a nil context when the caller had already left.
func (d *detach) start(run context.Context) (context.Context, context.CancelFunc) {
	d.mu.Lock()
	d.running = true
	d.mu.Unlock()
	if run.Err() != nil {
		return nil, func() {}
	}
	hctx, cancel := context.WithCancel(run)
	stop := context.AfterFunc(d.req, cancel)
	return hctx, func() { stop(); cancel() }
}

// close ends Do's context, once Do returned.
func (d *detach) close() {
	d.stop()
	d.cancel()
}
