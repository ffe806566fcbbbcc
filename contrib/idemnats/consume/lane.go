package consume

import (
	"context"
	"errors"
	"sync"
)

// ErrDrained means the Lane was drained: it takes no more messages.
var ErrDrained = errors.New("consume: lane drained")

// A Lane processes the messages of one subscriber: it holds up to
// Config.Depth of them claimed at once while their handlers run one at a time, so the
// claim of the next message and the recording and acknowledgement of the
// last overlap the handler of this one. The handler's work is as serial as
// a bare consumer's; only idemnode's round trips run beside it. Messages of
// one Lane may finish out of their delivery order when Depth is above 1
// (competing subscribers reorder them anyway).
type Lane struct {
	p *Processor
	h Handler
	// slots bounds the messages in flight; turn lets one handler run.
	slots chan struct{}
	turn  chan struct{}
	wg    sync.WaitGroup
	// mu orders Go's wg.Add against Drain: a broker's callback may still
	// hand over a message while the subscriber is being stopped.
	mu      sync.Mutex
	drained bool
	// hold ends at Drain: a message waiting for a key held elsewhere, or
	// for idemnode to come back, is handed back then instead of waiting
	// out HoldFor.
	hold     context.Context
	stopHold context.CancelFunc
}

// Lane returns a lane running h, for one subscriber.
func (p *Processor) Lane(h Handler) *Lane {
	hold, stopHold := context.WithCancel(context.Background())
	return &Lane{p: p, h: h, slots: make(chan struct{}, p.cfg.Depth), turn: make(chan struct{}, 1), hold: hold, stopHold: stopHold}
}

// Go waits for a free slot, then processes m in the background (Process);
// the broker learns the outcome through m. It returns at once, m untouched,
// with ctx's error when ctx ends first, or ErrDrained after Drain.
func (l *Lane) Go(ctx context.Context, m Message) error {
	l.mu.Lock()
	if l.drained {
		l.mu.Unlock()
		return ErrDrained
	}
	l.wg.Add(1)
	l.mu.Unlock()
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		l.wg.Done()
		return context.Cause(ctx)
	}
	go func() {
		defer l.wg.Done()
		defer func() { <-l.slots }()
		// Process reports every failure to the broker and logs what it
		// cannot return.
		hold, release := mergeDone(ctx, l.hold)
		defer release()
		_, _ = l.p.process(ctx, hold, m, l.serial)
	}()
	return nil
}

// Drain stops the lane taking messages (Go answers ErrDrained) and returns
// when every message it took is done. Messages waiting for a key held
// elsewhere or for idemnode are handed back (Nak) at once; a handler that
// runs finishes, and a result that ran is still recorded (up to HoldFor).
func (l *Lane) Drain() {
	l.mu.Lock()
	l.drained = true
	l.mu.Unlock()
	l.stopHold()
	l.wg.Wait()
}

// mergeDone returns a context that ends when a or b does, and the func
// that releases it (else b would keep a callback per message until it ends).
func mergeDone(a, b context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(a)
	stop := context.AfterFunc(b, func() { cancel(context.Cause(b)) })
	return ctx, func() { stop(); cancel(nil) }
}

// serial runs the lane's handler once no other handler of the lane runs.
func (l *Lane) serial(ctx context.Context, m Message) ([]byte, error) {
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-l.turn }()
	return l.h(ctx, m)
}
