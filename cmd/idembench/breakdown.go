package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// A part is where a CPU sample's time is charged: the first part whose
// markers occur in the sample's stack, read from the leaf down, is the one.
// The order matters: the store's work under the state machine's apply
// counts as the store, the state machine's own work as apply, and gRPC's
// frames under one of our handlers as the handler's.
type part struct {
	name    string
	markers []string
}

// parts splits a node's CPU by what the claim path does (docs/PERFORMANCE.md,
// "Where a claim's CPU goes"). Garbage collection comes first: a mark
// assist runs on whatever goroutine allocated, and is the collector's cost.
var parts = []part{
	{"GC", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcDrain", "runtime.markroot"}},
	{"raft log append + fsync", []string{"hashicorp/raft-wal", "cluster.(*guardedLogStore)", "raft-boltdb", "go.etcd.io/bbolt"}},
	{"store (ours + Pebble)", []string{"cockroachdb/pebble", "idemnode/store."}},
	{"state machine apply", []string{"raft.(*Raft).runFSM", "idemnode/fsm."}},
	{"forwarding to the leader", []string{"idemnode/rpc.(*forward", "idemnode/rpc.forward", "idemnode/rpc.(*inflight)", "idemnode/rpc.(*Server).serveForwarded"}},
	{"raft replication + transport", []string{"raft.(*Raft).replicate", "raft.(*NetworkTransport)", "raft.(*netPipeline)", "raft.(*Raft).processRPC", "raft.(*Raft).appendEntries", "raft.sendRPC", "raft.decodeResponse", "raft.(*Raft).heartbeat", "raft.(*Raft).pipeline"}},
	{"raft core", []string{"hashicorp/raft."}},
	{"proposal + commit wait", []string{"idemnode/cluster."}},
	{"protobuf (un)marshal", []string{"idemnode/rpc.textCodec", "idemnode/rpc.codec", "google.golang.org/protobuf/"}},
	{"request handling (ours)", []string{"idemnode/rpc.", "idemnode/server.", "idemnode/internal/"}},
	{"gRPC + HTTP/2", []string{"google.golang.org/grpc", "golang.org/x/net/http2"}},
	{"gossip + metrics", []string{"hashicorp/memberlist", "prometheus/", "armon/go-metrics", "hashicorp/go-metrics"}},
	{"scheduler + netpoll", []string{"runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m", "runtime.netpoll", "runtime.sysmon", "runtime.mstart", "runtime.goexit0"}},
}

const otherPart = "other"

// partOf names the part a stack (leaf first) is charged to.
func partOf(stack []string) string {
	for _, p := range parts {
		for _, fn := range stack {
			for _, m := range p.markers {
				if strings.Contains(fn, m) {
					return p.name
				}
			}
		}
	}
	return otherPart
}

// isSyscall reports whether a sample's leaf is a system call: the kernel
// time a part spends in writes, reads and fsyncs.
func isSyscall(leaf string) bool {
	return strings.HasPrefix(leaf, "syscall.") || strings.Contains(leaf, "runtime/syscall") ||
		strings.HasPrefix(leaf, "golang.org/x/sys/unix.")
}

// nodeBreakdown is one node's CPU seconds by part over a profile.
type nodeBreakdown struct {
	name     string
	seconds  map[string]float64
	syscalls map[string]float64
	duration float64 // the profile's length, seconds
}

// readBreakdown charges every CPU sample of a pprof profile to its part.
func readBreakdown(name string, r io.Reader) (*nodeBreakdown, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	idx := slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == "cpu" && st.Unit == "nanoseconds" })
	if idx < 0 {
		return nil, fmt.Errorf("%s: not a CPU profile (no cpu/nanoseconds sample type)", name)
	}
	b := &nodeBreakdown{name: name, seconds: map[string]float64{}, syscalls: map[string]float64{}, duration: float64(p.DurationNanos) / 1e9}
	var stack []string
	for _, s := range p.Sample {
		stack = stack[:0]
		for _, loc := range s.Location {
			// Inlined calls come first in a location's lines.
			for _, l := range loc.Line {
				if l.Function != nil {
					stack = append(stack, l.Function.Name)
				}
			}
		}
		sec := float64(s.Value[idx]) / 1e9
		part := partOf(stack)
		b.seconds[part] += sec
		if len(stack) > 0 && isSyscall(stack[0]) {
			b.syscalls[part] += sec
		}
	}
	return b, nil
}

// breakdownRun is one measured run of a results directory: its result line
// and the CPU profiles of its nodes (bench.sh's PROFILE=1).
type breakdownRun struct {
	row   tableRow
	label string
	nodes []*nodeBreakdown
}

// readBreakdownDir reads the idemnode result lines of a bench.sh results
// directory and the node profiles of each (cpu-<mode>-<clients>-node<i>.pprof).
func readBreakdownDir(dir string) ([]breakdownRun, error) {
	lines, err := readResults[labelledRow](filepath.Join(dir, "idemnode.jsonl"))
	if err != nil {
		return nil, err
	}
	var runs []breakdownRun
	for _, l := range lines {
		pattern := filepath.Join(dir, fmt.Sprintf("cpu-%s-%d-node*.pprof", l.Mode, l.Clients))
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			continue
		}
		slices.Sort(files)
		run := breakdownRun{row: l.tableRow, label: l.Label}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				return nil, fmt.Errorf("read profile: %w", err)
			}
			b, err := readBreakdown(strings.TrimSuffix(filepath.Base(f), ".pprof"), fh)
			fh.Close()
			if err != nil {
				return nil, err
			}
			run.nodes = append(run.nodes, b)
		}
		runs = append(runs, run)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no run with CPU profiles (run scripts/bench.sh with PROFILE=1)", dir)
	}
	return runs, nil
}

// labelledRow is a result line with its label (which setup ran).
type labelledRow struct {
	tableRow
	Label string `json:"label"`
}

// writeBreakdown prints, per run, the CPU per request of every part on
// every node: the profile's seconds over the requests answered while it
// ran (the run's rate times the profile's length).
func writeBreakdown(w io.Writer, runs []breakdownRun) {
	names := make([]string, 0, len(parts)+1)
	for _, p := range parts {
		names = append(names, p.name)
	}
	names = append(names, otherPart)
	for i, run := range runs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s, %d clients, %s: %.0f req/s; server CPU µs per request (profiles)\n\n", run.row.Mode, run.row.Clients, run.label, run.row.OpsPerSec)
		fmt.Fprint(w, "| part |")
		for _, n := range run.nodes {
			fmt.Fprintf(w, " %s |", strings.TrimPrefix(n.name, fmt.Sprintf("cpu-%s-%d-", run.row.Mode, run.row.Clients)))
		}
		fmt.Fprintln(w, " all nodes | of which system calls |")
		fmt.Fprint(w, "|---|")
		for range run.nodes {
			fmt.Fprint(w, "---:|")
		}
		fmt.Fprintln(w, "---:|---:|")
		perReq := func(n *nodeBreakdown, sec float64) float64 {
			reqs := run.row.OpsPerSec * n.duration
			if reqs <= 0 {
				return 0
			}
			return 1e6 * sec / reqs
		}
		totals := make([]float64, len(run.nodes))
		var all, allSys float64
		for _, name := range names {
			var sum, sys float64
			cells := make([]string, len(run.nodes))
			for j, n := range run.nodes {
				v := perReq(n, n.seconds[name])
				cells[j] = fmt.Sprintf("%.1f", v)
				totals[j] += v
				sum += v
				sys += perReq(n, n.syscalls[name])
			}
			all += sum
			allSys += sys
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f |\n", name, strings.Join(cells, " | "), sum, sys)
		}
		cells := make([]string, len(totals))
		for j, t := range totals {
			cells[j] = fmt.Sprintf("%.1f", t)
		}
		fmt.Fprintf(w, "| **total in profiles** | %s | **%.1f** | %.1f |\n", strings.Join(cells, " | "), all, allSys)
		if c := run.row.cpuPerRequest(); c > 0 {
			fmt.Fprintf(w, "\nThe servers' CPU from /proc over the measured window: %.1f µs per request.\n", c)
		}
	}
}
