// Command idembench is idemnode's closed-loop load generator. It drives a
// running cluster with the workload and the accounting of the peer baseline
// (shared/bench-peers: same keys, fingerprints, record sizes, modes, JSON
// fields), so idemnode and etcd can be compared line by line.
//
//	idembench -addrs 127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400 -mode claim -clients 64
//	idembench -table idemnode.jsonl etcd.jsonl redis.jsonl
//	idembench -breakdown bench-results/20261203T140000Z
//
// Modes: claim (a fresh key per request), claim+complete (claim, then
// complete with the token; the latency is the sum) and race (groups of
// -race-group clients claim the same fresh key at once; exactly one may win).
//
// Exit codes: 0 ok, 1 the run failed (preflight, connection), 2 bad flags,
// 3 a race violation or a won key whose stored record is not the winner's.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "idembench:", err)
		return 2
	}
	if cfg.breakdown != nil {
		for i, dir := range cfg.breakdown {
			runs, err := readBreakdownDir(dir)
			if err != nil {
				fmt.Fprintln(stderr, "idembench -breakdown:", err)
				return 1
			}
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "## %s\n\n", dir)
			writeBreakdown(stdout, runs)
		}
		return 0
	}
	if cfg.table != nil {
		if err := writeTable(stdout, cfg.table); err != nil {
			fmt.Fprintln(stderr, "idembench -table:", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "idembench:", err)
		return 1
	}
	if err := emit(res, cfg.out, stdout); err != nil {
		fmt.Fprintln(stderr, "idembench:", err)
		return 1
	}
	fmt.Fprintln(stderr, res.human())
	if res.failed() {
		return 3
	}
	return 0
}

// emit prints the JSON line and appends it to out when set.
func emit(res *Result, out string, stdout io.Writer) error {
	line, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	line = append(line, '\n')
	if _, err := stdout.Write(line); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if out == "" {
		return nil
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("-out %s: %w", out, err)
	}
	return f.Close()
}
