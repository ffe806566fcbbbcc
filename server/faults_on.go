//go:build faults

package server

import (
	"log/slog"
	"time"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc"
)

// Faults are the fault-injection settings of the jepsen harness, compiled
// only into a fault build (`go build -tags faults`); the release build's
// Faults is empty (faults_off.go).
type Faults struct {
	// ClockOffset shifts the time this node stamps into commands.
	ClockOffset time.Duration
	// DiskStallFile blocks Raft log writes while the file exists.
	DiskStallFile string
	// Bug plants a known bug (the jepsen self-test).
	Bug string
}

// apply puts the node's switches into cfg: the shifted clock, the stall
// file and the planted store bug.
func (f Faults) apply(cfg *cluster.Config) {
	if f.ClockOffset != 0 {
		cfg.Clock = clock.Offset(clock.Real(), f.ClockOffset)
	}
	cfg.Faults = cluster.Faults{DiskStallFile: f.DiskStallFile, AppliedAhead: f.Bug == cluster.BugAppliedAhead}
}

// rpcOptions returns the option that plants Bug in the API (none for the
// store's bug), and warns loudly that the node is incorrect.
func (f Faults) rpcOptions(log *slog.Logger) ([]rpc.Option, error) {
	if f.Bug == "" {
		return nil, nil
	}
	var opts []rpc.Option
	if f.Bug != cluster.BugAppliedAhead {
		bug, err := rpc.WithPlantedBug(f.Bug)
		if err != nil {
			return nil, err
		}
		opts = append(opts, bug)
	}
	log.Warn("FAULT INJECTION: planted bug enabled; this node is deliberately incorrect", "bug", f.Bug)
	return opts, nil
}
