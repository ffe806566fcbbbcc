package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// The foreign-join fault (issue 42, finding 1): a node restored from
// another cluster's backup is started with --join to the cluster under
// test. A voter holding another cluster's state forks the cluster (a key
// PENDING here answered as won there), so the leader must never add it;
// the node itself should stop with "belongs to another cluster". The heal
// reads the leader's Raft configuration: a server of another cluster in it
// fails the run, whatever the history shows. The other cluster holds
// records for the workload's own keys, so a fork that served them would
// also show in the history.

// refusalText is what a node that refuses to join another cluster logs
// (cluster.ErrOtherCluster and the fatal error that wraps it).
const refusalText = "belongs to another cluster"

// foreignAdmitted is the anomaly kind of a server of another cluster found
// in the Raft configuration.
const foreignAdmitted = "foreign-node-admitted"

// foreignRecords bounds the records the other cluster holds: enough to
// cover the workload's keys until the run ends, few enough to write in a
// second or two.
const foreignRecords = 400

// foreignCluster is the other cluster's backup, made once per run.
type foreignCluster struct {
	backup  string
	records int
	keys    string // the workload keys it holds records for, first..last
}

// outsiderIP is the i-th loopback address after the cluster's nodes: an
// address of the harness's network that no node uses and no partition cuts.
func (c *procCluster) outsiderIP(i int) string {
	return fmt.Sprintf("%s.%d", c.net, 10+len(c.nodes)+i)
}

// foreignJoin restores the other cluster's backup into a fresh node and
// starts it with the cluster's flags (no planted bug) and --join to every
// node, unsupervised: it is expected to exit by itself.
func foreignJoin(ctx context.Context, n *nemesis) (string, error) {
	if n.foreign == nil {
		f, err := n.makeForeign(ctx)
		if err != nil {
			return "", fmt.Errorf("make another cluster: %w", err)
		}
		n.foreign = f
	}
	n.intrusions++
	x := &node{id: fmt.Sprintf("x%d", n.intrusions), ip: n.c.outsiderIP(2), bin: n.c.bin, flags: n.c.flags}
	x.dir = filepath.Join(n.c.dir, x.id)
	n.c.outsiders = append(n.c.outsiders, x)
	n.intruder = x // from here on the heal cleans up
	if err := os.MkdirAll(x.dir, 0o755); err != nil {
		return "", err
	}
	var restored struct {
		ClusterID string `json:"cluster_id"`
	}
	if err := n.c.cli(ctx, &restored, "snapshot", "restore", n.foreign.backup, "--data-dir", x.dataDir(),
		"--node-id", x.id, "--raft-addr", x.raftAddr(), "-o", "json"); err != nil {
		return "", err
	}
	return fmt.Sprintf("restored %s from another cluster's backup (identity %s, %d records for keys %s) and joined it",
		x.id, restored.ClusterID, n.foreign.records, n.foreign.keys), x.startOnce(n.c.peersOf(nil))
}

// healForeignJoin stops the intruder if it still runs, notes whether it
// refused by itself, makes sure the leader did not add it (removing it and
// failing the run if it did), and deletes its data dir.
func healForeignJoin(n *nemesis) {
	x := n.intruder
	if x == nil {
		return
	}
	n.intruder = nil
	running := x.running()
	ended, code := x.lastExit()
	x.kill()
	log, _ := os.ReadFile(x.logFile())
	var refusal string
	switch {
	case ended && strings.Contains(string(log), refusalText):
		refusal = fmt.Sprintf("%s refused to join (exit %d: %q)", x.id, code, refusalText)
	case ended:
		refusal = fmt.Sprintf("%s exited %d without the refusal (see %s)", x.id, code, x.logFile())
	case running:
		refusal = fmt.Sprintf("%s did not refuse: still running at the heal, killed", x.id)
	default:
		refusal = x.id + " was not started"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	configuration := "not in the Raft configuration"
	found, err := n.c.checkConfiguration(ctx, n.res, "after "+x.id+" joined", n.log)
	switch {
	case err != nil:
		configuration = "configuration not checked (the run's end checks it): " + err.Error()
	case slices.Contains(found, x.id):
		configuration = "ADMITTED to the Raft configuration (removed; the run fails)"
	}
	if err := os.RemoveAll(x.dataDir()); err != nil {
		n.log("remove %s: %v", x.dataDir(), err)
	}
	n.healed = refusal + "; " + configuration
}

// checkConfiguration reads the leader's Raft configuration; every server in
// it that is not a node of the cluster is recorded in res (failing the
// run) and removed, so that later faults run against the cluster's own
// quorum. It returns the ids of those servers.
func (c *procCluster) checkConfiguration(ctx context.Context, res *runResult, when string, logf func(string, ...any)) ([]string, error) {
	l, err := c.waitLeader(ctx, 15*time.Second)
	if err != nil {
		return nil, err
	}
	conn, err := l.client()
	if err != nil {
		return nil, err
	}
	admin := idempb.NewAdminClient(conn)
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	members, err := admin.Members(mctx, &idempb.MembersRequest{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("members of %s: %w", l.id, err)
	}
	var found []string
	for _, s := range members.Servers {
		if slices.ContainsFunc(c.nodes, func(nd *node) bool { return nd.id == s.Id }) {
			continue
		}
		found = append(found, s.Id)
		breach := fmt.Sprintf("%s (%s, voter %t) in %s's Raft configuration %s", s.Id, s.Address, s.Voter, l.id, when)
		if err := removeMember(ctx, admin, s.Id); err != nil {
			breach += fmt.Sprintf("; removing it failed: %v", err)
		}
		res.admitted = append(res.admitted, breach)
		logf("foreign node admitted: %s", breach)
	}
	return found, nil
}

// makeForeign makes "another cluster": a one-node cluster of the same
// binary beside the cluster under test, holding records for keys the
// workload uses or will use (PENDING claims of other owners and completed
// ones), and takes its backup; then stops it.
func (n *nemesis) makeForeign(ctx context.Context) (*foreignCluster, error) {
	f := &node{id: "foreign", ip: n.c.outsiderIP(1), bin: n.c.bin, flags: n.c.common}
	f.dir = filepath.Join(n.c.dir, f.id)
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, err
	}
	n.c.outsiders = append(n.c.outsiders, f)
	// No --join and no --bootstrap-expect: serve bootstraps a one-node cluster.
	if err := f.startOnce(nil); err != nil {
		return nil, err
	}
	defer f.stop(10 * time.Second)
	if err := until(ctx, 30*time.Second, func() bool {
		st, err := f.status(ctx)
		return err == nil && st.State == "leader" && st.ClusterId != ""
	}); err != nil {
		return nil, fmt.Errorf("%s did not lead with an identity: %w", f.id, err)
	}
	keys := n.foreignKeys(ctx)
	if err := writeForeign(ctx, f, keys); err != nil {
		return nil, err
	}
	backup := filepath.Join(f.dir, "backup.snap")
	var saved struct {
		Records int `json:"records"`
	}
	if err := n.c.cli(ctx, &saved, "snapshot", "save", backup, "--addr", f.grpcAddr(), "--timeout", "20s", "-o", "json"); err != nil {
		return nil, err
	}
	return &foreignCluster{backup: backup, records: saved.Records, keys: keys[0] + ".." + keys[len(keys)-1]}, nil
}

// foreignKeys picks the workload keys the other cluster holds records for:
// spread over the key sets the workload moves through from now to the end
// of the run, at its pace so far and half again (the pace so far includes
// the cluster's start).
func (n *nemesis) foreignKeys(ctx context.Context) []string {
	ops := n.keys.ops.Load()
	first, last := ops/n.keys.opsPerGen, ops/n.keys.opsPerGen
	if end, ok := ctx.Deadline(); ok && n.clock() > 0 {
		perNs := 1.5 * float64(ops) / float64(n.clock())
		last += int64(perNs*float64(time.Until(end)))/n.keys.opsPerGen + 1
	}
	span, hot := last-first+1, int64(n.keys.hot)
	count := min(foreignRecords, span*hot)
	out := make([]string, count)
	for i := range count {
		out[i] = keyName(first+i*span/count, int(i%hot))
	}
	return out
}

// writeForeign claims every key with an owner of the other cluster, and
// completes every second one, a few at a time.
func writeForeign(ctx context.Context, f *node, keys []string) error {
	conn, err := f.client()
	if err != nil {
		return err
	}
	api := idempb.NewIdempotencyClient(conn)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := writeForeignRecord(ctx, api, keys[i], i%2 == 1); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	return firstErr
}

// writeForeignRecord claims key for an owner of the other cluster, with a
// lease and TTL that outlive the run, and completes it if asked.
func writeForeignRecord(ctx context.Context, api idempb.IdempotencyClient, key string, complete bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	owner := "foreign-" + key
	won, err := api.Claim(ctx, &idempb.ClaimRequest{Id: recordID(key), Fingerprint: fingerprint(key), Owner: owner,
		Lease: durationpb.New(30 * time.Minute), Ttl: durationpb.New(time.Hour)})
	if err != nil {
		return fmt.Errorf("claim %s on the other cluster: %w", key, err)
	}
	if won.Outcome != idempb.Outcome_OUTCOME_WON {
		return fmt.Errorf("claim %s on the other cluster: %s", key, won.Outcome)
	}
	if !complete {
		return nil
	}
	body := fmt.Sprintf(`{"by":%q,"token":%d}`, owner, won.Token)
	_, err = api.Complete(ctx, &idempb.CompleteRequest{Id: recordID(key), Token: won.Token,
		Response: &idempb.Response{Status: 201, Body: []byte(body)}})
	if err != nil {
		return fmt.Errorf("complete %s on the other cluster: %w", key, err)
	}
	return nil
}

// cli runs an idemnode client command and decodes its JSON output.
func (c *procCluster) cli(ctx context.Context, out any, args ...string) error {
	stdout, err := exec.CommandContext(ctx, c.bin, args...).Output()
	name := "idemnode " + strings.Join(args[:2], " ")
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(ee.Stderr)))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		return fmt.Errorf("%s: read its output %q: %w", name, stdout, err)
	}
	return nil
}

// until polls cond every 100 ms until it holds, ctx ends or timeout passes.
func until(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return nil
}
