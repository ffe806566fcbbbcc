//go:build faults

package main

import (
	"time"

	"github.com/spf13/pflag"

	idemserver "github.com/idemnode/idemnode/server"
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

// config is the server's fault settings.
func (ff *faultFlags) config() idemserver.Faults {
	return idemserver.Faults{ClockOffset: ff.clockOffset, DiskStallFile: ff.stallFile, Bug: ff.bug}
}
