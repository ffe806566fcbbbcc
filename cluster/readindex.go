package cluster

import (
	"context"
	"sync"
)

// confirmer shares one leadership confirmation among concurrent reads. A
// read may rely only on a confirmation that started after it took its read
// index: a quorum's answer sent before that moment says nothing about
// whether a newer leader committed writes since. So a read never joins the
// round in flight; it joins the next one, which starts when the one in
// flight ends and carries every read that arrived meanwhile.
type confirmer struct {
	confirm func() error

	// mu guards next and running.
	mu      sync.Mutex
	next    *round
	running bool
}

// round is one confirmation and the reads waiting for it.
type round struct {
	done chan struct{}
	err  error
}

// wait returns the result of a confirmation that starts after the call.
func (c *confirmer) wait(ctx context.Context) error {
	c.mu.Lock()
	r := c.next
	if r == nil {
		r = &round{done: make(chan struct{})}
		c.next = r
	}
	if !c.running {
		c.running = true
		go c.run()
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run confirms round after round while reads keep arriving.
func (c *confirmer) run() {
	for {
		c.mu.Lock()
		r := c.next
		c.next = nil
		if r == nil {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		r.err = c.confirm()
		close(r.done)
	}
}
