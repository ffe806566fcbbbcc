// Package clock is the time a node reads where time decides an outcome:
// the now a leader stamps into the commands it proposes, the ticker that
// proposes expiry, and the timers that end a held wait or a holder's lease.
// Production runs on Real; tests run on a fake they advance
// (internal/testclock) instead of sleeping out a lease or a TTL, and a
// fault build shifts one node's clock with Offset. The state machine (fsm/)
// reads no clock at all: it applies the time stamped into each command.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers that fire by it. Implementations
// must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed on this clock.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on its channel every
	// d on this clock; d must be positive.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer of some Clock.
type Timer interface {
	// C is the channel the time is sent on.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Ticker is a time.Ticker of some Clock.
type Ticker interface {
	// C is the channel the ticks are sent on.
	C() <-chan time.Time
	// Stop turns the ticker off.
	Stop()
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// Offset returns c shifted by d: Now is d later (earlier when negative),
// timers and tickers run as c's. A fault build uses it to skew one node's
// clock; upgrade tests to put a node at the time their fixtures were written.
func Offset(c Clock, d time.Duration) Clock { return offsetClock{c, d} }

type offsetClock struct {
	Clock
	d time.Duration
}

func (o offsetClock) Now() time.Time { return o.Clock.Now().Add(o.d) }

// WithTimeout is context.WithTimeout on c: the context ends with
// context.DeadlineExceeded when d has passed on c, or when parent ends or
// cancel is called. On the real clock (shifted or not) it is
// context.WithTimeout itself, so production keeps the runtime's timers. The
// context carries no deadline of its own: a deadline on another clock than
// the real one would mean nothing to whoever reads it (gRPC sends it on).
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if o, ok := c.(offsetClock); ok {
		c = o.Clock
	}
	if _, ok := c.(realClock); ok {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := c.NewTimer(d)
	go func() {
		select {
		case <-t.C():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return timeoutCtx{ctx}, func() { cancel(context.Canceled) }
}

// timeoutCtx is a context that a clock's timer may end: its Err is
// context.DeadlineExceeded then, as a context.WithTimeout's would be.
type timeoutCtx struct{ context.Context }

func (c timeoutCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}
