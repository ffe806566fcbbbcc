package checker

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/idemnode/idemnode/jepsen/history"
)

// Random valid histories of a correct server must pass every checker: a
// false positive would make the harness useless.
func TestSimulatedHistoriesHaveNoAnomalies(t *testing.T) {
	seeds, steps := 300, 200
	if testing.Short() {
		seeds = 20
	}
	var stats simStats
	for seed := range uint64(seeds) {
		events := newSim(seed).run(steps)
		stats.add(events)
		faults := []history.Fault{
			{Time: 50 * ms, Name: "partition-leader", Phase: history.FaultStart},
			{Time: 150 * ms, Name: "partition-leader", Phase: history.FaultEnd},
		}
		r := Check(events, faults, Options{LinearizabilityTimeout: time.Minute})
		if !r.OK() || len(r.Warnings) > 0 {
			t.Fatalf("seed %d: a correct history was flagged:\n%s", seed, r.Summary())
		}
	}
	// The simulation must reach the interesting rows, or the test proves little.
	t.Logf("simulated: %+v", stats)
	for name, n := range map[string]int{"takeovers": stats.takeovers, "fenced": stats.fenced,
		"regrants after expiry": stats.regrants, "in progress": stats.inProgress, "replays": stats.replays,
		"indeterminate": stats.info, "not found": stats.notFound} {
		if n < seeds {
			t.Errorf("only %d %s over %d histories", n, name, seeds)
		}
	}
}

type simStats struct {
	takeovers, fenced, regrants, inProgress, replays, info, notFound int
}

func (s *simStats) add(events []history.Event) {
	granted := map[string]bool{}
	for _, e := range events {
		switch {
		case e.Type == history.Info:
			s.info++
		case e.Type != history.OK:
		case e.Outcome == outWon && e.Attempt > 1:
			s.takeovers++
		case e.Outcome == outWon && granted[e.Key]:
			s.regrants++
		case e.Outcome == outFenced:
			s.fenced++
		case e.Outcome == outInProgress:
			s.inProgress++
		case e.Outcome == outCompleted:
			s.replays++
		case e.Outcome == outNotFound:
			s.notFound++
		}
		if e.Outcome == outWon {
			granted[e.Key] = true
		}
	}
}

// The checkers do look at simulated histories: a read changed to bytes
// nobody completed is caught.
func TestSimulatedMutationIsCaught(t *testing.T) {
	caught := 0
	for seed := range uint64(20) {
		events := newSim(seed).run(200)
		for i, e := range events {
			if e.Type == history.OK && e.F == history.FGet && e.RecState == "completed" {
				events[i].RecBody = "forged"
				r := Check(events, nil, Options{})
				if r.OK() {
					t.Fatalf("seed %d: forged read not caught", seed)
				}
				caught++
				break
			}
		}
	}
	if caught == 0 {
		t.Fatal("no simulated history had a completed read")
	}
}

// The checkers catch the server bugs of rpc/bugs_faults.go (and a lease bug of the
// state machine) planted into the simulator, each by its own kind.
func TestSimulatedPlantedBugsAreCaught(t *testing.T) {
	for bug, kind := range map[string]string{bugSkipFencing: KindPhantomRead,
		bugStaleReads: KindNonLinearizable, bugEarlyTakeover: KindLeaseViolation} {
		t.Run(bug, func(t *testing.T) {
			const seeds = 10
			caught := 0
			for seed := range uint64(seeds) {
				s := newSim(seed)
				s.bug = bug
				r := Check(s.run(200), nil, Options{LinearizabilityTimeout: 5 * time.Second})
				if slices.Contains(kinds(r), kind) {
					caught++
				}
			}
			if caught < seeds*7/10 {
				t.Fatalf("%s caught as %s in %d of %d histories", bug, kind, caught, seeds)
			}
		})
	}
}

// TestStress runs many more, and more concurrent, random valid histories;
// set CHECKER_STRESS=1 to run it (a few minutes).
func TestStress(t *testing.T) {
	if os.Getenv("CHECKER_STRESS") == "" {
		t.Skip("set CHECKER_STRESS=1")
	}
	for _, cfg := range []struct{ spread, steps, seeds, info, retry, life int }{
		{3, 400, 1000, 10, 10, 50}, {6, 300, 1000, 10, 10, 50}, {9, 200, 600, 10, 10, 50},
		{4, 600, 100, 25, 3, 400}, {2, 1000, 50, 15, 2, 1000}} {
		warnings := 0
		for seed := range uint64(cfg.seeds) {
			s := newSim(seed + 1000000*uint64(cfg.spread))
			s.spread, s.infoPct, s.retryPct, s.keyLife = int64(cfg.spread)*ms, cfg.info, cfg.retry, cfg.life
			r := Check(s.run(cfg.steps), nil, Options{})
			if !r.OK() {
				t.Fatalf("%+v seed %d: a correct history was flagged:\n%s", cfg, seed, r.Summary())
			}
			warnings += len(r.Warnings)
		}
		t.Logf("%+v: %d linearizability timeouts", cfg, warnings)
	}
}
