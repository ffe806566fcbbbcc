package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// run checks the cluster's semantics, drives the load and builds the result.
func run(ctx context.Context, cfg config) (*Result, error) {
	p, err := dialPool(cfg.addrs, cfg.conns)
	if err != nil {
		return nil, err
	}
	defer p.close()
	prefix := runPrefix()
	pre := "skipped"
	if cfg.preflight {
		if pre, err = preflight(ctx, p.client(0), prefix); err != nil {
			return nil, err
		}
	}
	notes := describe(cfg, p.leader(ctx))

	start := time.Now()
	w := window{start: start.Add(cfg.warmup), end: start.Add(cfg.warmup + cfg.duration), timeout: cfg.timeout, lease: cfg.lease}
	cpu := measureCPU(ctx, w, cfg.pids)
	all := drive(ctx, cfg, p, w, prefix)
	report := <-cpu
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	res := newResult(cfg, all, report)
	res.Preflight, res.Notes = pre, notes
	if cfg.mode == modeRace && len(all.raceWins) > 0 {
		res.RaceVerified, res.RaceVerifyBad = verifyRace(ctx, p.client(0), all.raceWins, cfg.verifyMax)
	}
	return res, nil
}

// drive runs every client until the window ends and merges what they counted.
func drive(ctx context.Context, cfg config, p *pool, w window, prefix string) *recorder {
	var recs []*recorder
	var wg sync.WaitGroup
	if cfg.mode == modeRace {
		first := 0
		for g, size := range raceGroups(cfg.clients, cfg.raceGroup) {
			r := &recorder{}
			recs = append(recs, r)
			groupPrefix, from := fmt.Sprintf("%srace/%d/", prefix, g), first
			wg.Go(func() { raceGroup(ctx, p, w, groupPrefix, from, size, cfg.verifyMax, r) })
			first += size
		}
	} else {
		for i := range cfg.clients {
			r := &recorder{}
			recs = append(recs, r)
			wg.Go(func() { uniqueClient(ctx, p.client(i), w, prefix, cfg.mode == modeComplete, uint64(i), r) })
		}
	}
	wg.Wait()
	all := &recorder{}
	for _, r := range recs {
		all.merge(r)
	}
	return all
}

// measureCPU reads the CPU counters at the two edges of the window.
func measureCPU(ctx context.Context, w window, pids []int) <-chan CPUReport {
	out := make(chan CPUReport, 1)
	go func() {
		sleepUntil(ctx, w.start)
		a := takeCPU(pids)
		sleepUntil(ctx, w.end)
		out <- cpuBetween(a, takeCPU(pids), runtime.NumCPU())
	}()
	return out
}

func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

func newResult(cfg config, all *recorder, cpu CPUReport) *Result {
	secs := cfg.duration.Seconds()
	l := summarise(all.lat)
	res := &Result{
		Time: time.Now().UTC().Format(time.RFC3339), Target: "idemnode", Label: cfg.label, Mode: cfg.mode,
		Clients: cfg.clients, DurationS: secs, WarmupS: cfg.warmup.Seconds(),
		Requests: all.requests, OpsPerSec: round1(float64(all.requests) / secs), StoreOpsPS: round1(float64(all.storeOps) / secs),
		P50: l.p50, P90: l.p90, P99: l.p99, P999: l.p999, Max: l.max, Mean: l.mean,
		Errors: all.errors, ErrorSample: all.errSample, UnexpectedLost: all.lost, CASFailed: all.casFailed,
		RaceViolations: all.raceViol, CPU: cpu, Go: runtime.Version(),
	}
	if cfg.mode == modeComplete {
		c, d := summarise(all.claimLat), summarise(all.completeLat)
		res.ClaimP50, res.ClaimP99, res.CompleteP50, res.CompleteP99 = c.p50, c.p99, d.p50, d.p99
	}
	if cfg.mode == modeRace {
		res.RaceGroup, res.RaceKeys = cfg.raceGroup, all.raceKeys
		res.RaceKeysPerSec = round1(float64(all.raceKeys) / secs)
		res.RaceIndeterminate = all.raceIndet
	}
	return res
}

// describe says what exactly was measured, for the notes field.
func describe(cfg config, leader string) string {
	return fmt.Sprintf("idemnode over gRPC (rpc/idempb, one request per op, no retries), %d nodes (leader %s), "+
		"clients pinned round-robin to the nodes (followers forward writes), %d connections per node; "+
		"claim: fresh owner, lease %s, TTL %s per record, fingerprint raw SHA-256 (32 B); complete: status 201 + %d-B body with the claim's token; "+
		"race: each member its own owner and fingerprint (losers get MISMATCH), read-back by linearizable Get of fingerprint and token",
		len(cfg.addrs), leader, cfg.conns, cfg.lease, ttl, responseSize)
}
