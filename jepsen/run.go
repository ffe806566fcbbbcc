package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemnode/idemnode/internal/netfault"
	"github.com/idemnode/idemnode/jepsen/history"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// run executes one harness run and returns the exit code.
func run(cfg config) int {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	dir, err := resultsDir(cfg)
	if err != nil {
		logf("%v", err)
		return 2
	}
	logf("results in %s", dir)
	res, err := execute(cfg, dir, logf)
	if err != nil {
		logf("run failed: %v", err)
		return 1
	}
	return verdict(cfg, dir, res, logf)
}

func resultsDir(cfg config) (string, error) {
	dir := cfg.out
	if dir == "" {
		dir = filepath.Join(moduleRoot(), "jepsen", "results", time.Now().UTC().Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create results dir: %w", err)
	}
	return filepath.Abs(dir)
}

// moduleRoot is the repository root, so results land in jepsen/results
// whatever directory the harness was started from.
func moduleRoot() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(out) < 2 {
		return "."
	}
	return filepath.Dir(string(out[:len(out)-1]))
}

// faultsTag is the build tag that compiles idemnode's fault-injection
// flags and planted bugs in; the release build has neither, and every node
// of the harness starts with --fault-disk-stall-file.
const faultsTag = "faults"

// buildBinary builds a fault build of idemnode, or checks that -bin is one.
func buildBinary(cfg config, dir string) (string, error) {
	if cfg.bin != "" {
		bin, err := filepath.Abs(cfg.bin)
		if err != nil {
			return "", err
		}
		return bin, checkFaultBuild(bin)
	}
	bin := filepath.Join(dir, "idemnode")
	cmd := exec.Command("go", "build", "-tags", faultsTag, "-o", bin, "github.com/idemnode/idemnode/cmd/idemnode")
	cmd.Dir = moduleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build idemnode: %v: %s", err, out)
	}
	return bin, nil
}

// checkFaultBuild refuses a release build as -bin up front, rather than as
// nodes that never start. The extra argument makes either build stop after
// parsing the flags, so no server starts whatever the environment sets.
func checkFaultBuild(bin string) error {
	out, err := exec.Command(bin, "serve", "--fault-disk-stall-file", "probe", "probe").CombinedOutput()
	if err != nil && strings.Contains(string(out), "unknown flag") {
		return fmt.Errorf("-bin %s has no fault-injection flags: build it with go build -tags %s ./cmd/idemnode", bin, faultsTag)
	}
	return nil
}

// runResult is what the run produced for the checker and the summary.
type runResult struct {
	ops      int64
	keys     int
	skipped  []string
	elapsed  time.Duration
	converge error
	// admitted lists the servers of another cluster found in the Raft
	// configuration (foreign.go): each fails the run.
	admitted []string
}

// execute starts the cluster, runs workload and nemesis, heals, converges
// and takes the final reads. Every fault is undone on every exit path,
// including Ctrl-C.
func execute(cfg config, dir string, logf func(string, ...any)) (*runResult, error) {
	bin, err := buildBinary(cfg, dir)
	if err != nil {
		return nil, err
	}
	c, err := newProcCluster(cfg, dir, bin)
	if err != nil {
		return nil, err
	}
	res := &runResult{}
	chosen, err := setupFaults(cfg, c, res, logf)
	if err != nil {
		return nil, err
	}
	defer c.shutdown()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	hist, err := history.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	faultLog, err := history.Create(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	clock := func() int64 { return int64(time.Since(start)) }

	if err := c.startAll(); err != nil {
		return nil, err
	}
	if _, err := c.waitLeader(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	logf("cluster of %d up; workload: %d clients for %s; nemesis: %d faults, seed %d", cfg.nodes, cfg.clients, cfg.duration, len(chosen), cfg.seed)
	keys := &keySpace{hot: cfg.hotKeys, opsPerGen: cfg.opsGen, seen: map[string]bool{}}
	runLoad(ctx, cfg, c, chosen, keys, hist, faultLog, clock, res, logf)
	if err := faultLog.Close(); err != nil {
		return nil, err
	}

	logf("healing")
	c.healAll()
	if _, err := c.waitLeader(ctx, 60*time.Second); err != nil {
		return nil, fmt.Errorf("after healing: %w", err)
	}
	if _, err := c.converge(ctx, 90*time.Second); err != nil {
		logf("%v", err)
	}
	all := res.sortedKeys(keys)
	if err := c.finalReads(ctx, all, hist, clock); err != nil {
		return nil, err
	}
	sts, err := c.converge(ctx, 30*time.Second)
	res.converge = err
	if err != nil {
		logf("%v", err)
		sts = c.statuses(ctx)
	}
	if err := recordStatus(sts, hist, clock); err != nil {
		return nil, err
	}
	if _, err := c.checkConfiguration(ctx, res, "at the end", logf); err != nil {
		logf("check the final configuration: %v", err)
	}
	res.keys, res.elapsed = len(all), time.Since(start)
	return res, hist.Close()
}

func (r *runResult) sortedKeys(k *keySpace) []string {
	all := k.all()
	sort.Strings(all)
	return all
}

// setupFaults resolves the nemesis list and the iptables chain; faults
// that need root are skipped, with the reason, when iptables is unusable.
func setupFaults(cfg config, c *procCluster, res *runResult, logf func(string, ...any)) ([]fault, error) {
	wanted, err := cfg.chosenFaults(true)
	if err != nil {
		return nil, err
	}
	reason := netfault.Available()
	if reason == nil {
		if c.part, err = netfault.New(cfg.chainTag()); err != nil {
			reason = err
		}
	}
	if reason == nil {
		return wanted, nil
	}
	var kept []fault
	for _, f := range wanted {
		if f.needsRoot {
			res.skipped = append(res.skipped, f.name)
			continue
		}
		kept = append(kept, f)
	}
	if len(res.skipped) > 0 {
		logf("skipping %v: %v", res.skipped, reason)
	}
	return kept, nil
}

// feedWatchers follow the abandoned feed beside the clients (watcher.go):
// two, so the checker can compare what two nodes' feeds said.
const feedWatchers = 2

// runLoad runs the clients, the feed's watchers and the nemesis for the
// configured duration.
func runLoad(ctx context.Context, cfg config, c *procCluster, chosen []fault, keys *keySpace,
	hist, faultLog *history.Writer, clock func() int64, res *runResult, logf func(string, ...any)) {
	loadCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	var opSeq atomic.Int64
	for p := range cfg.clients {
		w := &worker{process: p, node: c.nodes[p%len(c.nodes)], keys: keys, hist: hist, clock: clock,
			minTTL: cfg.minTTL, opSeq: &opSeq, rng: rand.New(rand.NewPCG(cfg.seed, uint64(p)+1))}
		wg.Add(1)
		go func() { defer wg.Done(); w.run(loadCtx) }()
	}
	for i := range feedWatchers {
		w := &watcher{process: cfg.clients + i, nodes: c.nodes, hist: hist, clock: clock,
			rng: rand.New(rand.NewPCG(cfg.seed, uint64(cfg.clients+i)+1))}
		wg.Add(1)
		go func() { defer wg.Done(); w.run(loadCtx) }()
	}
	if len(chosen) > 0 {
		n := &nemesis{c: c, rng: rand.New(rand.NewPCG(cfg.seed, 0)), hist: faultLog, clock: clock, log: logf,
			keys: keys, res: res}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.run(loadCtx, chosen, cfg.quiet, cfg.active)
		}()
	}
	wg.Wait()
	res.ops = opSeq.Load()
}

// statuses collects whatever status the nodes give (for the checker when
// they did not converge).
func (c *procCluster) statuses(ctx context.Context) (out []*idempb.StatusResponse) {
	for _, n := range c.nodes {
		if st, err := n.status(ctx); err == nil {
			out = append(out, st)
		}
	}
	return out
}
