// Package testclock is a clock.Clock that moves only when a test says so:
// a test advances it past a lease or a TTL instead of sleeping it out.
package testclock

import (
	"sort"
	"sync"
	"time"

	"github.com/idemnode/idemnode/clock"
)

// Clock is a fake clock.Clock. Its timers and tickers fire during Advance,
// in the order of their deadlines, each seeing Now at its own deadline.
type Clock struct {
	// mu guards now and the pending timers: tests advance the clock while
	// the node under test reads it and arms timers from its goroutines.
	mu      sync.Mutex
	now     time.Time
	pending []*timer
}

// New returns a clock that reads start until it is advanced.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward, firing every timer and ticker due on
// the way. A ticker due several times fires once, as a time.Ticker whose
// reader is late drops ticks.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.pending, func(i, j int) bool { return c.pending[i].at.Before(c.pending[j].at) })
		if len(c.pending) == 0 || c.pending[0].at.After(end) {
			break
		}
		t := c.pending[0]
		c.pending = c.pending[1:]
		c.now = t.at
		select {
		case t.ch <- t.at:
		default:
		}
		if t.every > 0 {
			t.at = t.at.Add(t.every)
			for !t.at.After(end) {
				t.at = t.at.Add(t.every)
			}
			c.pending = append(c.pending, t)
		}
	}
	c.now = end
}

// Waiting returns how many timers and tickers are armed: a test that must
// advance the clock only once the code under test waits on it waits for
// this to grow.
func (c *Clock) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// NewTimer returns a timer that fires once the clock reaches Now()+d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer { return c.arm(d, 0) }

// NewTicker returns a ticker that fires every d of the clock.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("testclock: non-positive ticker interval")
	}
	return ticker{c.arm(d, d)}
}

func (c *Clock) arm(d, every time.Duration) *timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, ch: make(chan time.Time, 1), at: c.now.Add(d), every: every}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.pending = append(c.pending, t)
	return t
}

// timer is a Timer or a Ticker of Clock.
type timer struct {
	c     *Clock
	ch    chan time.Time
	at    time.Time
	every time.Duration // 0 for a timer
}

func (t *timer) C() <-chan time.Time { return t.ch }

// Stop removes t from the clock; it reports whether t was still pending.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, p := range t.c.pending {
		if p == t {
			t.c.pending = append(t.c.pending[:i], t.c.pending[i+1:]...)
			return true
		}
	}
	return false
}

// ticker is a timer that rearms itself; its Stop reports nothing.
type ticker struct{ t *timer }

func (t ticker) C() <-chan time.Time { return t.t.ch }
func (t ticker) Stop()               { t.t.Stop() }

var _ clock.Clock = (*Clock)(nil)
