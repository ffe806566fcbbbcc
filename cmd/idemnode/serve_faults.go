//go:build faults

package main

import (
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc"
)

// faultFlags are serve's fault-injection flags, for the jepsen harness
// only: compiled into a fault build (`go build -tags faults`), hidden, and
// off by default. The release build has none (serve_nofaults.go).
type faultFlags struct {
	clockOffset time.Duration
	stallFile   string
	bug         string
}

func (ff *faultFlags) register(fl *pflag.FlagSet) {
	fl.DurationVar(&ff.clockOffset, "fault-clock-offset", 0, "FAULT INJECTION: shift this node's clock")
	fl.StringVar(&ff.stallFile, "fault-disk-stall-file", "", "FAULT INJECTION: Raft log writes block while this file exists")
	fl.StringVar(&ff.bug, "fault-bug", "", "FAULT INJECTION: plant a known bug (jepsen self-test)")
	for _, name := range []string{"fault-clock-offset", "fault-disk-stall-file", "fault-bug"} {
		_ = fl.MarkHidden(name)
	}
}

// clock is the real clock shifted by --fault-clock-offset (nil, the real
// clock, without it).
func (ff *faultFlags) clock() clock.Clock {
	if ff.clockOffset == 0 {
		return nil
	}
	return clock.Offset(clock.Real(), ff.clockOffset)
}

// cluster returns the node's switches: the stall file and the planted store bug.
func (ff *faultFlags) cluster() cluster.Faults {
	return cluster.Faults{DiskStallFile: ff.stallFile, AppliedAhead: ff.bug == cluster.BugAppliedAhead}
}

// rpcOptions returns the option that plants --fault-bug in the API (none
// for the store's bug), and warns loudly that the node is incorrect.
func (ff *faultFlags) rpcOptions(log *slog.Logger) ([]rpc.Option, error) {
	if ff.bug == "" {
		return nil, nil
	}
	var opts []rpc.Option
	if ff.bug != cluster.BugAppliedAhead {
		bug, err := rpc.WithPlantedBug(ff.bug)
		if err != nil {
			return nil, err
		}
		opts = append(opts, bug)
	}
	log.Warn("FAULT INJECTION: planted bug enabled; this node is deliberately incorrect", "bug", ff.bug)
	return opts, nil
}
