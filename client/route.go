package client

import (
	"context"
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
			if stale && c.refreshing.CompareAndSwap(false, true) {
				go func() {
					defer c.refreshing.Store(false)
					c.discover(context.Background(), true)
				}()
			}
			return addr
		}
		if addr := c.discover(ctx, false); addr != "" {
			return addr
		}
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

// discover asks every listed node for its status at once and returns the
// address to send leader-bound calls to ("" when none answered with a
// leader). A node that says it leads is believed first; otherwise the
// leader that most nodes name. Unless force is set, a leader found
// meanwhile by another caller is used.
func (c *Client) discover(ctx context.Context, force bool) string {
	c.discoverMu.Lock()
	defer c.discoverMu.Unlock()
	if addr := c.Leader(); addr != "" && !force {
		return addr // another caller found it while this one queued
	}
	ctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	type answer struct {
		addr string // the listed address that answered
		st   *idempb.StatusResponse
	}
	answers := make(chan answer, len(c.cfg.Addrs))
	for _, addr := range c.cfg.Addrs {
		go func() {
			var st *idempb.StatusResponse
			if conn, err := c.conn(addr); err == nil {
				st, _ = idempb.NewAdminClient(conn).Status(ctx, &idempb.StatusRequest{})
			}
			answers <- answer{addr, st}
		}()
	}
	votes := map[string]int{}
	best, via := "", ""
	for range c.cfg.Addrs {
		a := <-answers
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
	best = c.reachable(ctx, best, via)
	if best != "" {
		c.mu.Lock()
		c.leader, c.leaderAt = best, time.Now()
		c.mu.Unlock()
	}
	return best
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
