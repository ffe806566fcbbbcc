package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

const (
	modeClaim    = "claim"
	modeComplete = "claim+complete"
	modeRace     = "race"
)

// defaultAddrs are the nodes scripts/cluster.sh starts.
const defaultAddrs = "127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400"

type config struct {
	addrs     []string
	conns     int // gRPC connections per node
	clients   int
	duration  time.Duration
	warmup    time.Duration
	mode      string
	raceGroup int
	timeout   time.Duration
	lease     time.Duration
	label     string
	out       string
	pids      []int
	verifyMax int
	preflight bool
	// table lists JSON-lines files to turn into the comparison table
	// instead of running load (-table).
	table []string
	// breakdown lists bench.sh results directories whose node profiles to
	// split by part instead of running load (-breakdown).
	breakdown []string
}

// parseFlags reads the command line. A bad flag is an error the caller
// answers with exit code 2.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var addrs, pids string
	var table, breakdown bool
	fs := flag.NewFlagSet("idembench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addrs, "addrs", defaultAddrs, "comma-separated gRPC addresses of all nodes; clients are pinned round-robin to them")
	fs.IntVar(&c.conns, "conns", 2, "gRPC connections per node, shared by the clients pinned to it")
	fs.IntVar(&c.clients, "clients", 64, "concurrent logical clients (each has one request in flight)")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "measured window")
	fs.DurationVar(&c.warmup, "warmup", 5*time.Second, "unmeasured load before the window")
	fs.StringVar(&c.mode, "mode", modeClaim, "claim | claim+complete | race")
	fs.IntVar(&c.raceGroup, "race-group", 8, "race mode: clients that claim the same key at once")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "per-operation timeout")
	fs.DurationVar(&c.lease, "lease", lease, "the lease of the load's claims: a claim never completed (claim mode) is marked abandoned when it ends")
	fs.StringVar(&c.label, "label", "", "free text copied into the result")
	fs.StringVar(&c.out, "out", "", "also append the JSON line to this file")
	fs.StringVar(&pids, "pids", "", "comma-separated server PIDs whose CPU use to report")
	fs.IntVar(&c.verifyMax, "race-verify", 2000, "race mode: after the run, read back up to N won keys and check the stored record is the winner's")
	fs.BoolVar(&c.preflight, "preflight", true, "check claim/complete semantics on one key before the load")
	fs.BoolVar(&table, "table", false, "print a markdown table comparing idemnode with its peers from the JSON-lines files given as arguments, and exit")
	fs.BoolVar(&breakdown, "breakdown", false, "print the server CPU per request by part, from the node profiles in the scripts/bench.sh PROFILE=1 results directories given as arguments, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: idembench [flags]\n       idembench -table FILE.jsonl...\n       idembench -breakdown RESULTS_DIR...\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if table && breakdown {
		return c, errors.New("-table and -breakdown exclude each other")
	}
	if breakdown {
		if fs.NArg() == 0 {
			return c, errors.New("-breakdown needs at least one results directory")
		}
		c.breakdown = fs.Args()
		return c, nil
	}
	if table {
		if fs.NArg() == 0 {
			return c, errors.New("-table needs at least one JSON-lines file")
		}
		c.table = fs.Args()
		return c, nil
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q (files are only for -table and -breakdown)", fs.Args())
	}
	c.addrs = splitList(addrs)
	var err error
	if c.pids, err = parsePIDs(pids); err != nil {
		return c, err
	}
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.mode != modeClaim && c.mode != modeComplete && c.mode != modeRace:
		return fmt.Errorf("-mode must be claim, claim+complete or race, got %q", c.mode)
	case len(c.addrs) == 0:
		return errors.New("-addrs: need at least one address")
	case c.clients < 1 || c.clients > 10000:
		return fmt.Errorf("-clients must be 1-10000, got %d", c.clients)
	case c.mode == modeRace && (c.clients < 2 || c.raceGroup < 2 || c.raceGroup > 64):
		return fmt.Errorf("race mode needs -clients >= 2 and -race-group 2-64, got %d and %d", c.clients, c.raceGroup)
	case c.conns < 1 || c.conns > 64:
		return fmt.Errorf("-conns must be 1-64, got %d", c.conns)
	case c.duration <= 0 || c.warmup < 0 || c.timeout <= 0:
		return fmt.Errorf("-duration and -timeout must be positive and -warmup not negative, got %s, %s, %s", c.duration, c.timeout, c.warmup)
	case c.lease < time.Second || c.lease > ttl:
		return fmt.Errorf("-lease must be 1s-%s (the TTL), got %s", ttl, c.lease)
	case c.verifyMax < 0:
		return fmt.Errorf("-race-verify must not be negative, got %d", c.verifyMax)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, v := range splitList(s) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-pids: %q is not a process id", v)
		}
		pids = append(pids, n)
	}
	return pids, nil
}
