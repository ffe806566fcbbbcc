package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/jepsen/history"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// A fault is injected by start and undone by heal; heal must also be safe
// after a partial start. Faults that need iptables say so.
type fault struct {
	name      string
	needsRoot bool
	minNodes  int
	start     func(ctx context.Context, n *nemesis) (detail string, err error)
	heal      func(n *nemesis)
}

// nemesis injects faults from a seeded schedule.
type nemesis struct {
	c     *procCluster
	rng   *rand.Rand
	hist  *history.Writer
	clock func() int64
	log   func(format string, args ...any)
	keys  *keySpace  // the workload's keys, which the foreign cluster's records use
	res   *runResult // where a heal records a foreign node admitted

	// healed is what the last heal found, for its log line and record.
	healed string
	// foreign is the other cluster's backup, made at the first
	// foreign-join; intruder the node restored from it, until the heal;
	// intrusions counts them, so each gets a fresh id (foreign.go).
	foreign    *foreignCluster
	intruder   *node
	intrusions int
}

var faults = []fault{
	{name: "partition-leader", needsRoot: true, start: partitionLeader, heal: healNet},
	{name: "partition-halves", needsRoot: true, start: partitionHalves, heal: healNet},
	{name: "partition-ring", needsRoot: true, minNodes: 5, start: partitionRing, heal: healNet},
	{name: "partition-bridge", needsRoot: true, minNodes: 5, start: partitionBridge, heal: healNet},
	{name: "partition-oneway", needsRoot: true, start: partitionOneWay, heal: healNet},
	{name: "kill-leader", start: killLeader, heal: restartAll},
	{name: "kill-random", start: killRandom, heal: restartAll},
	{name: "kill-all", start: killAll, heal: restartAll},
	{name: "pause", start: pauseRandom, heal: resumeAll},
	{name: "skew", start: skewRandom, heal: unskewAll},
	{name: "transfer", start: transferLeadership, heal: func(*nemesis) {}},
	{name: "membership", start: removeFollower, heal: restartAll},
	{name: "stall-leader-disk", start: stallLeaderDisk, heal: unstallAll},
	{name: "foreign-join", start: foreignJoin, heal: healForeignJoin},
}

func faultByName(name string) (fault, bool) {
	for _, f := range faults {
		if f.name == name {
			return f, true
		}
	}
	return fault{}, false
}

// run cycles through the chosen faults until ctx ends: quiet, fault, heal.
func (n *nemesis) run(ctx context.Context, chosen []fault, quiet, active time.Duration) {
	for i := 0; ; i++ {
		sleep(ctx, jitter(n.rng, quiet))
		if ctx.Err() != nil {
			return
		}
		f := chosen[n.rng.IntN(len(chosen))]
		if i < len(chosen) {
			f = chosen[i] // every chosen fault runs at least once, in order
		}
		detail, err := f.start(ctx, n)
		if err != nil {
			n.log("nemesis %s: %v", f.name, err)
		}
		n.record(f.name, history.FaultStart, detail)
		n.log("nemesis %s start: %s", f.name, detail)
		sleep(ctx, jitter(n.rng, active))
		n.healed = ""
		f.heal(n)
		n.record(f.name, history.FaultEnd, n.healed)
		if n.healed != "" {
			n.log("nemesis %s healed: %s", f.name, n.healed)
		} else {
			n.log("nemesis %s healed", f.name)
		}
	}
}

func jitter(r *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(r.Int64N(int64(d)))
}

func (n *nemesis) record(name, phase, detail string) {
	_ = n.hist.AddFault(history.Fault{Time: n.clock(), Name: name, Phase: phase, Detail: detail})
}

func (n *nemesis) leaderOrRandom(ctx context.Context) *node {
	if l := n.c.leader(ctx); l != nil {
		return l
	}
	return n.c.nodes[n.rng.IntN(len(n.c.nodes))]
}

func (n *nemesis) shuffled() []*node {
	out := append([]*node(nil), n.c.nodes...)
	n.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func ids(nodes []*node) string {
	var s []string
	for _, nd := range nodes {
		s = append(s, nd.id)
	}
	return strings.Join(s, ",")
}

func partitionLeader(ctx context.Context, n *nemesis) (string, error) {
	l := n.leaderOrRandom(ctx)
	return "isolated " + l.id, n.c.part.Isolate(l.ip, n.c.ips()...)
}

// cutGroups cuts every link between the two groups, both ways.
func (n *nemesis) cutGroups(a, b []*node) error {
	for _, x := range a {
		for _, y := range b {
			if err := n.c.part.Cut(x.ip, y.ip); err != nil {
				return err
			}
		}
	}
	return nil
}

func partitionHalves(_ context.Context, n *nemesis) (string, error) {
	nodes := n.shuffled()
	minority := nodes[:len(nodes)/2]
	return fmt.Sprintf("%s | %s", ids(minority), ids(nodes[len(nodes)/2:])), n.cutGroups(minority, nodes[len(nodes)/2:])
}

// partitionRing: every node sees only its two ring neighbours, so each has
// a majority of its own and no two agree on which.
func partitionRing(_ context.Context, n *nemesis) (string, error) {
	nodes := n.shuffled()
	k := len(nodes)
	for i := range nodes {
		for j := i + 1; j < k; j++ {
			if d := j - i; d != 1 && d != k-1 {
				if err := n.c.part.Cut(nodes[i].ip, nodes[j].ip); err != nil {
					return "", err
				}
			}
		}
	}
	return "ring " + ids(nodes), nil
}

// partitionBridge: two pairs that cannot see each other, and one node that
// sees everyone.
func partitionBridge(_ context.Context, n *nemesis) (string, error) {
	nodes := n.shuffled()
	left, bridge, right := nodes[:2], nodes[2], nodes[3:]
	return fmt.Sprintf("%s | bridge %s | %s", ids(left), bridge.id, ids(right)), n.cutGroups(left, right)
}

// partitionOneWay drops everything the leader sends; it still receives.
func partitionOneWay(ctx context.Context, n *nemesis) (string, error) {
	l := n.leaderOrRandom(ctx)
	for _, o := range n.c.nodes {
		if o != l {
			if err := n.c.part.CutOneWay(l.ip, o.ip); err != nil {
				return "", err
			}
		}
	}
	return "one-way from " + l.id, nil
}

func healNet(n *nemesis) {
	if err := n.c.part.Heal(); err != nil {
		n.log("heal partitions: %v", err)
	}
}

func killLeader(ctx context.Context, n *nemesis) (string, error) {
	l := n.leaderOrRandom(ctx)
	l.kill()
	return "killed " + l.id, nil
}

func killRandom(_ context.Context, n *nemesis) (string, error) {
	v := n.c.nodes[n.rng.IntN(len(n.c.nodes))]
	v.kill()
	return "killed " + v.id, nil
}

func killAll(_ context.Context, n *nemesis) (string, error) {
	for _, nd := range n.c.nodes {
		nd.kill()
	}
	return "killed all", nil
}

func restartAll(n *nemesis) {
	for _, nd := range n.c.nodes {
		if err := nd.start(n.c.peersOf(nd)); err != nil {
			n.log("restart %s: %v", nd.id, err)
		}
	}
}

func pauseRandom(ctx context.Context, n *nemesis) (string, error) {
	v := n.leaderOrRandom(ctx)
	if n.rng.IntN(2) == 0 {
		v = n.c.nodes[n.rng.IntN(len(n.c.nodes))]
	}
	return "paused " + v.id, v.signal(syscall.SIGSTOP)
}

func resumeAll(n *nemesis) {
	for _, nd := range n.c.nodes {
		_ = nd.signal(syscall.SIGCONT)
	}
}

// skewRandom restarts one node with its clock shifted (all processes share
// the kernel clock, so the skew is a fault-injection flag of idemnode). The
// skew stays below the shortest lease the workload uses, the bound under
// which DESIGN.md promises one live holder.
func skewRandom(_ context.Context, n *nemesis) (string, error) {
	v := n.c.nodes[n.rng.IntN(len(n.c.nodes))]
	skew := time.Duration(50+n.rng.IntN(200)) * time.Millisecond
	if n.rng.IntN(2) == 0 {
		skew = -skew
	}
	v.kill()
	v.mu.Lock()
	v.skew = skew
	v.mu.Unlock()
	return fmt.Sprintf("%s clock %+v", v.id, skew), v.start(n.c.peersOf(v))
}

func unskewAll(n *nemesis) {
	for _, nd := range n.c.nodes {
		nd.mu.Lock()
		skewed := nd.skew != 0
		nd.skew = 0
		nd.mu.Unlock()
		if skewed {
			nd.kill()
			_ = nd.start(n.c.peersOf(nd))
		}
	}
}

func transferLeadership(ctx context.Context, n *nemesis) (string, error) {
	l := n.c.leader(ctx)
	if l == nil {
		return "no leader", nil
	}
	conn, err := l.client()
	if err != nil {
		return "", err
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = idempb.NewAdminClient(conn).TransferLeadership(tctx, &idempb.TransferLeadershipRequest{})
	return "from " + l.id, err
}

// removeFollower replaces a follower the way an operator does: kill it,
// wait until the leader's gossip sees it dead, remove it from the Raft
// configuration; the heal restarts it and the leader adds it back.
func removeFollower(ctx context.Context, n *nemesis) (string, error) {
	l := n.c.leader(ctx)
	if l == nil {
		return "no leader", nil
	}
	var victim *node
	for _, nd := range n.shuffled() {
		if nd != l {
			victim = nd
			break
		}
	}
	victim.kill()
	conn, err := l.client()
	if err != nil {
		return "", err
	}
	return "killed and removed " + victim.id, removeMember(ctx, idempb.NewAdminClient(conn), victim.id)
}

// removeMember removes a killed server from the Raft configuration,
// retrying until the leader's gossip has declared it dead.
func removeMember(ctx context.Context, admin idempb.AdminClient, id string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := admin.RemoveMember(rctx, &idempb.RemoveMemberRequest{Id: id})
		cancel()
		if status.Code(err) == codes.NotFound {
			return nil // not in the configuration: already removed (--dead-server-cleanup)
		}
		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		sleep(ctx, 200*time.Millisecond) // gossip has not declared it dead yet
	}
}

// stallLeaderDisk blocks the leader's Raft log writes; its watchdog exits
// the process after --disk-stall-timeout and the supervisor restarts it.
func stallLeaderDisk(ctx context.Context, n *nemesis) (string, error) {
	l := n.leaderOrRandom(ctx)
	return "stalled " + l.id, os.WriteFile(l.stallFile(), nil, 0o644)
}

func unstallAll(n *nemesis) {
	for _, nd := range n.c.nodes {
		_ = os.Remove(nd.stallFile())
	}
}
