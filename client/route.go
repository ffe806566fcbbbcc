package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// route says where a call goes.
type route int

const (
	// toLeader: writes, linearizable reads and waits go to the leader, or to
	// any node (which forwards) while none is known.
	toLeader route = iota
	// toAny: stale reads are served by whichever node answers.
	toAny
)

// discoverTimeout bounds one round of asking the nodes who leads.
const discoverTimeout = time.Second

// target returns the address to send a call to.
func (c *Client) target(ctx context.Context, r route) string {
	if r == toLeader {
		c.mu.Lock()
		addr, stale := c.leader, time.Since(c.leaderAt) > c.cfg.LeaderRefresh
		c.mu.Unlock()
		if addr != "" {
			if stale {
				c.startDiscovery() // in the background; addr serves meanwhile
			}
			return addr
		}
		addr, err := c.discover(ctx)
		if addr != "" {
			return addr
		}
		// The call goes to a listed node and fails or succeeds there; the
		// reason discovery found no leader is only worth a note.
		c.cfg.Logger.Debug("idemnode client: no leader found; trying the listed nodes in turn", "err", err)
	}
	// No leader known: any node forwards to the leader once one is elected.
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := c.cfg.Addrs[c.next%len(c.cfg.Addrs)]
	c.next++
	return addr
}

// forget drops addr as the leader after a call to it failed, and moves the
// rotation on, so the next attempt asks again or tries another node.
func (c *Client) forget(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == addr {
		c.leader = ""
	}
	c.next++
}

// discovery is one round of asking the nodes who leads, shared by every
// caller that wants one while it runs: callers wait for its end (or their
// own context's) instead of queueing behind a lock for rounds of their own.
type discovery struct {
	done chan struct{}
	// addr and err are set before done closes.
	addr string
	err  error
}

// errClosed: the client was closed.
var errClosed = errors.New("client is closed")

// discover waits for a round of discovery, the one running or a new one,
// and returns the address to send leader-bound calls to, or "" and why.
func (c *Client) discover(ctx context.Context) (string, error) {
	d := c.startDiscovery()
	if d == nil {
		return "", errClosed
	}
	select {
	case <-d.done:
		return d.addr, d.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// startDiscovery returns the round running now or starts one, in the
// background so that no caller's context cuts it short for the others;
// nil once the client is closed. Close cancels the round and waits for it.
func (c *Client) startDiscovery() *discovery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.discovering != nil {
		return c.discovering
	}
	d := &discovery{done: make(chan struct{})}
	c.discovering = d
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		d.addr, d.err = c.askLeader(c.stopped)
		c.mu.Lock()
		c.discovering = nil
		if d.addr != "" {
			c.leader, c.leaderAt = d.addr, time.Now()
		}
		c.mu.Unlock()
		close(d.done)
	}()
	return d
}

// askLeader asks every listed node for its status at once and returns the
// address to send leader-bound calls to. A node that says it leads is
// believed first; otherwise the leader that most nodes name. When no node
// names one it returns "" and the last error a node answered, if any.
func (c *Client) askLeader(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	type answer struct {
		addr string // the listed address that answered
		st   *idempb.StatusResponse
		err  error
	}
	answers := make(chan answer, len(c.cfg.Addrs))
	for _, addr := range c.cfg.Addrs {
		go func() {
			conn, err := c.conn(addr)
			var st *idempb.StatusResponse
			if err == nil {
				st, err = idempb.NewAdminClient(conn).Status(ctx, &idempb.StatusRequest{})
			}
			answers <- answer{addr, st, err}
		}()
	}
	votes := map[string]int{}
	best, via := "", ""
	var lastErr error
	for range c.cfg.Addrs {
		a := <-answers
		if a.err != nil {
			lastErr = fmt.Errorf("status of %s: %w", a.addr, a.err)
			continue
		}
		if a.st.GetLeaderAddr() == "" {
			continue
		}
		if a.st.GetState() == "leader" {
			best, via = a.st.GetLeaderAddr(), a.addr
			break
		}
		votes[a.st.GetLeaderAddr()]++
		if votes[a.st.GetLeaderAddr()] > votes[best] {
			best = a.st.GetLeaderAddr()
		}
	}
	if best == "" {
		if lastErr == nil {
			lastErr = errors.New("no node knows a leader")
		}
		return "", fmt.Errorf("discover the leader: %w", lastErr)
	}
	return c.reachable(ctx, best, via), nil
}

// unreachableFor is how long an advertised leader address that did not
// answer the client is passed over before it is tried again.
const unreachableFor = time.Minute

// reachable returns where to send leader-bound calls given the leader's
// advertised address and via, the listed address at which the leader
// itself answered ("" when it did not). The advertised address is used
// when it is listed or answers a probe. Otherwise, as when a container's
// hostname does not resolve on the host that publishes its port, via is
// used, or "" when there is none: calls then rotate through the listed
// nodes, which forward them to the leader.
func (c *Client) reachable(ctx context.Context, advertised, via string) string {
	if advertised == "" || slices.Contains(c.cfg.Addrs, advertised) {
		return advertised
	}
	c.mu.Lock()
	failed, ok := c.unreachable[advertised]
	c.mu.Unlock()
	if ok && time.Since(failed) < unreachableFor {
		return via
	}
	conn, err := c.conn(advertised)
	if err == nil {
		_, err = idempb.NewAdminClient(conn).Status(ctx, &idempb.StatusRequest{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.unreachable, advertised)
		return advertised
	}
	c.unreachable[advertised] = time.Now()
	// Close the connection rather than let it redial in the background
	// until the next probe; that one dials afresh.
	if conn, ok := c.conns[advertised]; ok {
		conn.Close()
		delete(c.conns, advertised)
	}
	return via
}
