// Command jepsen runs an idemnode cluster of real processes on this
// machine, drives a racing claim/complete workload against it while a
// seeded nemesis injects faults (partitions, kills, pauses, clock skew,
// leadership transfers, membership changes, a stalled disk, a node restored
// from another cluster's backup that joins), then heals, reads every key
// from every node and checks the history for anomalies: two winners, two
// completions, lost writes, broken fencing, non-linearizable reads, and a
// server of another cluster admitted. It exits 1 on any anomaly.
//
//	go run ./jepsen -profile ci
//	go run ./jepsen -profile nightly
//	go run ./jepsen -nemesis partition-leader,kill-leader -duration 2m -seed 7
//	go run ./jepsen -bug skip-fencing -expect fencing   # the checker must catch it
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/idemnode/idemnode/internal/testaddr"
)

// config is one run's parameters.
type config struct {
	profile  string
	nodes    int
	clients  int
	duration time.Duration
	seed     uint64
	nemesis  string
	quiet    time.Duration
	active   time.Duration
	bug      string
	expect   string
	out      string
	subnet   int
	bin      string
	hotKeys  int
	opsGen   int64
	minTTL   time.Duration
	// checkTimeout is porcupine's budget per key: a key it gives up on
	// is a warning, not a verdict.
	checkTimeout time.Duration
	// addrs, when a test sets it, is the block of package testaddr the
	// nodes listen on and the partitions are named after, instead of
	// 127.0.<subnet>.x and the chain J<subnet>: a test run beside another
	// harness run never meets it.
	addrs *testaddr.Block
}

// netPrefix is the first three octets of the nodes' addresses.
func (c config) netPrefix() string {
	if c.addrs != nil {
		return c.addrs.Prefix()
	}
	return fmt.Sprintf("127.0.%d", c.subnet)
}

// chainTag names the run's iptables chain (netfault.New).
func (c config) chainTag() string {
	if c.addrs != nil {
		return c.addrs.Chain()
	}
	return fmt.Sprintf("J%d", c.subnet)
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "jepsen:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.StringVar(&cfg.profile, "profile", "ci", "ci (about 3 minutes, fixed seed), nightly (30+ minutes, every nemesis), or custom")
	fs.IntVar(&cfg.nodes, "nodes", 0, "cluster size, 3 or 5 (default from profile)")
	fs.IntVar(&cfg.clients, "clients", 0, "concurrent clients, 10-30 (default from profile)")
	fs.DurationVar(&cfg.duration, "duration", 0, "how long the workload runs (default from profile)")
	fs.Uint64Var(&cfg.seed, "seed", 0, "seed of the fault schedule and workload (default: profile's, or time)")
	fs.StringVar(&cfg.nemesis, "nemesis", "", "comma-separated faults, 'all' or 'none' (default from profile); known: "+faultNames())
	fs.DurationVar(&cfg.quiet, "quiet", 4*time.Second, "mean quiet time between faults")
	fs.DurationVar(&cfg.active, "active", 6*time.Second, "mean time a fault lasts")
	fs.StringVar(&cfg.bug, "bug", "", "plant a known bug in every node (skip-fencing, stale-reads, follower-claims, feed-replay, applied-ahead)")
	fs.StringVar(&cfg.expect, "expect", "", "anomaly kinds (comma-separated) the run must report one of (with -bug): exit 0 only if found")
	fs.StringVar(&cfg.out, "out", "", "results directory (default jepsen/results/<timestamp>)")
	fs.IntVar(&cfg.subnet, "subnet", 77, "nodes listen on 127.0.<subnet>.11..15")
	fs.StringVar(&cfg.bin, "bin", "", "idemnode binary to test, a fault build (go build -tags faults ./cmd/idemnode; default: built so from this tree)")
	fs.IntVar(&cfg.hotKeys, "hot-keys", 4, "keys the clients race on at a time")
	fs.Int64Var(&cfg.opsGen, "ops-per-key-set", 120, "operations before moving to fresh keys")
	fs.DurationVar(&cfg.minTTL, "min-ttl", 3*time.Second, "shortest TTL a claim asks for (each draws up to 20s more)")
	fs.DurationVar(&cfg.checkTimeout, "check-timeout", 10*time.Second, "how long the linearizability check may spend on one key before it gives up with a warning (1s-1h)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if err := cfg.applyProfile(); err != nil {
		return cfg, err
	}
	return cfg, cfg.validate()
}

// applyProfile fills what the flags left unset.
func (c *config) applyProfile() error {
	type profile struct {
		nodes, clients int
		duration       time.Duration
		seed           uint64
		nemesis        string
	}
	profiles := map[string]profile{
		// CI's seed runs every fault once, in order, within the first
		// ~130 s (the last, foreign-join, starts at ~125 s); 140 s leaves
		// a slower machine room for it.
		"ci":      {nodes: 3, clients: 12, duration: 140 * time.Second, seed: 1, nemesis: "all"},
		"nightly": {nodes: 5, clients: 24, duration: 30 * time.Minute, nemesis: "all"},
		"custom":  {nodes: 3, clients: 12, duration: time.Minute, nemesis: "all"},
	}
	p, ok := profiles[c.profile]
	if !ok {
		return fmt.Errorf("-profile must be ci, nightly or custom, got %q", c.profile)
	}
	if c.nodes == 0 {
		c.nodes = p.nodes
	}
	if c.clients == 0 {
		c.clients = p.clients
	}
	if c.duration == 0 {
		c.duration = p.duration
	}
	if c.seed == 0 {
		c.seed = p.seed
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	if c.nemesis == "" {
		c.nemesis = p.nemesis
	}
	return nil
}

func (c *config) validate() error {
	switch {
	case c.nodes != 3 && c.nodes != 5:
		return fmt.Errorf("-nodes must be 3 or 5, got %d", c.nodes)
	case c.clients < 1 || c.clients > 64:
		return fmt.Errorf("-clients must be 1-64, got %d", c.clients)
	case c.duration <= 0:
		return fmt.Errorf("-duration must be positive")
	case c.subnet < 1 || c.subnet > 254:
		return fmt.Errorf("-subnet must be 1-254, got %d", c.subnet)
	case c.expect != "" && c.bug == "":
		return fmt.Errorf("-expect goes with -bug")
	case c.hotKeys < 1 || c.opsGen < 1:
		return fmt.Errorf("-hot-keys and -ops-per-key-set must be positive")
	case c.minTTL < 2*time.Second || c.minTTL > 24*time.Hour:
		return fmt.Errorf("-min-ttl must be 2s-24h (the nodes refuse a TTL under 2s), got %s", c.minTTL)
	case c.checkTimeout < time.Second || c.checkTimeout > time.Hour:
		return fmt.Errorf("-check-timeout must be 1s-1h, got %s", c.checkTimeout)
	}
	_, err := c.chosenFaults(true)
	return err
}

// chosenFaults resolves -nemesis; with root false, faults that need
// iptables are left out (and reported by the caller).
func (c *config) chosenFaults(root bool) ([]fault, error) {
	if c.nemesis == "none" {
		return nil, nil
	}
	var names []string
	if c.nemesis == "all" {
		for _, f := range faults {
			names = append(names, f.name)
		}
	} else {
		names = strings.Split(c.nemesis, ",")
	}
	var out []fault
	for _, name := range names {
		f, ok := faultByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("unknown nemesis %q (known: %s)", name, faultNames())
		}
		if f.minNodes > c.nodes && c.nemesis == "all" {
			continue
		}
		if f.minNodes > c.nodes {
			return nil, fmt.Errorf("nemesis %s needs %d nodes", f.name, f.minNodes)
		}
		if f.needsRoot && !root {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

func faultNames() string {
	var s []string
	for _, f := range faults {
		s = append(s, f.name)
	}
	return strings.Join(s, ",")
}

// reproduce is the command line that replays this run.
func (c *config) reproduce() string {
	s := fmt.Sprintf("go run ./jepsen -profile %s -nodes %d -clients %d -duration %s -seed %d -nemesis %s",
		c.profile, c.nodes, c.clients, c.duration, c.seed, c.nemesis)
	if c.bug != "" {
		s += " -bug " + c.bug
	}
	if c.expect != "" {
		s += " -expect " + c.expect
	}
	if c.checkTimeout != 10*time.Second {
		s += " -check-timeout " + c.checkTimeout.String()
	}
	return s
}
