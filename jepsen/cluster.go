package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/idemnode/idemnode/internal/netfault"
	"github.com/idemnode/idemnode/jepsen/history"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// procCluster is the cluster of node processes under test.
type procCluster struct {
	nodes []*node
	part  *netfault.Partitioner // nil when partitions are unavailable

	// What the foreign-join fault needs to start servers beside the
	// cluster (foreign.go): the results dir, the binary, the network, the
	// timings every server gets, and the cluster's flags without a planted
	// bug.
	dir, bin      string
	net           string // the nodes' first three octets
	common, flags []string
	// outsiders are the processes started beside the cluster; shutdown
	// stops them too.
	outsiders []*node
}

func newProcCluster(cfg config, dir, bin string) (*procCluster, error) {
	common := []string{"--gossip-profile", "local",
		"--snapshot-threshold", "256", "--snapshot-interval", "1s",
		"--min-lease", "100ms", "--min-ttl", "2s", "--expiry-interval", "200ms",
		"--disk-stall-timeout", "4s", "--log-level", "warn"}
	c := &procCluster{dir: dir, bin: bin, net: cfg.netPrefix(), common: common,
		flags: append([]string{"--bootstrap-expect", fmt.Sprint(cfg.nodes)}, common...)}
	flags := c.flags
	if cfg.bug != "" {
		flags = append(slices.Clone(flags), "--fault-bug", cfg.bug)
	}
	for i := 1; i <= cfg.nodes; i++ {
		n := &node{id: fmt.Sprintf("n%d", i), ip: fmt.Sprintf("%s.%d", c.net, 10+i),
			dir: filepath.Join(dir, fmt.Sprintf("n%d", i)), bin: bin, flags: flags}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

func (c *procCluster) peersOf(n *node) []string {
	var out []string
	for _, o := range c.nodes {
		if o != n {
			out = append(out, o.gossipAddr())
		}
	}
	return out
}

func (c *procCluster) startAll() error {
	for _, n := range c.nodes {
		if err := n.start(c.peersOf(n)); err != nil {
			return err
		}
	}
	return nil
}

func (c *procCluster) ips() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.ip)
	}
	return out
}

// leader returns the node that reports itself leader, or nil.
func (c *procCluster) leader(ctx context.Context) *node {
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		if st, err := n.status(ctx); err == nil && st.State == "leader" {
			return n
		}
	}
	return nil
}

// waitLeader waits until some node is leader and answers a linearizable
// read, or the timeout passes.
func (c *procCluster) waitLeader(ctx context.Context, timeout time.Duration) (*node, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.leader(ctx); l != nil {
			conn, err := l.client()
			if err == nil {
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err = idempb.NewIdempotencyClient(conn).Get(rctx, &idempb.GetRequest{Id: &idempb.RecordId{Key: "leader-probe"}})
				cancel()
				if err == nil {
					return l, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no leader within %s", timeout)
}

// healAll undoes every fault: partitions, pauses, stalls, skews, kills.
func (c *procCluster) healAll() {
	if c.part != nil {
		_ = c.part.Heal()
	}
	for _, n := range c.nodes {
		_ = os.Remove(n.stallFile())
		n.mu.Lock()
		paused, skewed := n.paused, n.skew != 0
		n.mu.Unlock()
		if paused {
			_ = n.signal(syscall.SIGCONT)
		}
		if skewed {
			n.kill()
			n.mu.Lock()
			n.skew = 0
			n.mu.Unlock()
		}
		_ = n.start(c.peersOf(n))
	}
}

// converge waits until every node reports the same applied index and
// digest, and returns their final status.
func (c *procCluster) converge(ctx context.Context, timeout time.Duration) ([]*idempb.StatusResponse, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		var sts []*idempb.StatusResponse
		seen := map[string]bool{}
		for _, n := range c.nodes {
			st, err := n.status(ctx)
			if err != nil {
				seen["error:"+n.id] = true
				continue
			}
			sts = append(sts, st)
			seen[fmt.Sprintf("%d/%s", st.AppliedIndex, st.Digest)] = true
		}
		if len(seen) == 1 && len(sts) == len(c.nodes) {
			return sts, nil
		}
		var views []string
		for k := range seen {
			views = append(views, k)
		}
		sort.Strings(views)
		last = strings.Join(views, " ")
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("nodes did not converge within %s: %s", timeout, last)
}

// finalReads reads every key on every node (stale: each node's own state).
func (c *procCluster) finalReads(ctx context.Context, keys []string, h *history.Writer, clock func() int64) error {
	for _, n := range c.nodes {
		conn, err := n.client()
		if err != nil {
			return err
		}
		api := idempb.NewIdempotencyClient(conn)
		for _, k := range keys {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := api.Get(rctx, &idempb.GetRequest{Id: recordID(k), Consistency: idempb.Consistency_CONSISTENCY_STALE})
			cancel()
			if err != nil {
				return fmt.Errorf("final read of %s on %s: %w", k, n.id, err)
			}
			e := history.Event{Type: history.OK, F: history.FFinalRead, Key: k, Node: n.id, Time: clock(),
				Outcome: outcomeName(resp.Outcome)}
			fillRecord(&e, resp.Record)
			if err := h.Add(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordStatus writes each node's final status; taken after the final
// reads, its FSM time bounds the time at which they were served.
func recordStatus(sts []*idempb.StatusResponse, h *history.Writer, clock func() int64) error {
	for _, st := range sts {
		if err := h.Add(history.Event{Type: history.OK, F: history.FFinalStatus, Node: st.NodeId, Time: clock(),
			AppliedIndex: st.AppliedIndex, Digest: st.Digest, FSMTime: st.FsmTime.AsTime().UnixNano()}); err != nil {
			return err
		}
	}
	return nil
}

// shutdown stops every process and removes the partition chain.
func (c *procCluster) shutdown() {
	for _, n := range c.nodes {
		_ = n.signal(syscall.SIGCONT)
		n.kill()
	}
	for _, n := range c.outsiders {
		n.kill()
	}
	if c.part != nil {
		c.part.Close()
	}
}
