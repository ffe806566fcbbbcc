package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/idemnode/idemnode/jepsen/checker"
	"github.com/idemnode/idemnode/jepsen/history"
)

// verdict checks the recorded history, writes summary.txt and returns the
// exit code: 0 for a clean run (or, with -expect, when the expected anomaly
// was found), 1 otherwise.
func verdict(cfg config, dir string, res *runResult, logf func(string, ...any)) int {
	events, faultsSeen, err := readRun(dir)
	if err != nil {
		logf("%v", err)
		return 1
	}
	report := checker.Check(events, faultsSeen, checker.Options{VisualizeDir: filepath.Join(dir, "linearizability"),
		LinearizabilityTimeout: cfg.checkTimeout})
	for _, a := range res.admitted {
		report.Anomalies = append(report.Anomalies, checker.Anomaly{Kind: foreignAdmitted, Explanation: "foreign node admitted: " + a})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "idemnode jepsen run\nreproduce: %s\nresults:   %s\n\n", cfg.reproduce(), dir)
	fmt.Fprintf(&b, "nodes %d, clients %d, duration %s, elapsed %s\n", cfg.nodes, cfg.clients, cfg.duration, res.elapsed.Round(1e9))
	fmt.Fprintf(&b, "operations %d, keys %d, history events %d\n", res.ops, res.keys, len(events))
	fmt.Fprintf(&b, "faults injected: %s\n", faultCounts(faultsSeen))
	if len(res.skipped) > 0 {
		fmt.Fprintf(&b, "faults skipped (need root and iptables): %s\n", strings.Join(res.skipped, ", "))
	}
	if res.converge != nil {
		fmt.Fprintf(&b, "convergence: %v\n", res.converge)
	}
	for _, a := range res.admitted {
		fmt.Fprintf(&b, "foreign node admitted: %s\n", a)
	}
	b.WriteString("\n" + report.Summary())
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(b.String()), 0o644); err != nil {
		logf("write summary: %v", err)
	}
	fmt.Print(b.String())
	return exitCode(cfg, report, res)
}

func exitCode(cfg config, report checker.Report, res *runResult) int {
	if cfg.expect != "" {
		want := strings.Split(cfg.expect, ",")
		for _, a := range report.Anomalies {
			if slices.Contains(want, a.Kind) {
				fmt.Printf("\nexpected anomaly %q found: the checker catches the planted bug %q\n", a.Kind, cfg.bug)
				return 0
			}
		}
		fmt.Printf("\nnone of the expected anomalies %q found with planted bug %q\n", cfg.expect, cfg.bug)
		return 1
	}
	if !report.OK() || res.converge != nil {
		return 1
	}
	return 0
}

func readRun(dir string) ([]history.Event, []history.Fault, error) {
	hf, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	defer hf.Close()
	events, err := history.Read(hf)
	if err != nil {
		return nil, nil, err
	}
	nf, err := os.Open(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	defer nf.Close()
	fs, err := history.ReadFaults(nf)
	return events, fs, err
}

func faultCounts(fs []history.Fault) string {
	counts := map[string]int{}
	for _, f := range fs {
		if f.Phase == history.FaultStart {
			counts[f.Name]++
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for name, n := range counts {
		parts = append(parts, fmt.Sprintf("%s×%d", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
