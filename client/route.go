package client

import (
	"context"
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
// leader's address ("" when none answered with one). A node that says it
// leads is believed first; otherwise the leader that most nodes name.
// Unless force is set, a leader found meanwhile by another caller is used.
func (c *Client) discover(ctx context.Context, force bool) string {
	c.discoverMu.Lock()
	defer c.discoverMu.Unlock()
	if addr := c.Leader(); addr != "" && !force {
		return addr // another caller found it while this one queued
	}
	ctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	answers := make(chan *idempb.StatusResponse, len(c.cfg.Addrs))
	for _, addr := range c.cfg.Addrs {
		go func() {
			var st *idempb.StatusResponse
			if conn, err := c.conn(addr); err == nil {
				st, _ = idempb.NewAdminClient(conn).Status(ctx, &idempb.StatusRequest{})
			}
			answers <- st
		}()
	}
	votes := map[string]int{}
	best := ""
	for range c.cfg.Addrs {
		st := <-answers
		if st.GetLeaderAddr() == "" {
			continue
		}
		if st.GetState() == "leader" {
			best = st.GetLeaderAddr()
			break
		}
		votes[st.GetLeaderAddr()]++
		if votes[st.GetLeaderAddr()] > votes[best] {
			best = st.GetLeaderAddr()
		}
	}
	if best != "" {
		c.mu.Lock()
		c.leader, c.leaderAt = best, time.Now()
		c.mu.Unlock()
	}
	return best
}
