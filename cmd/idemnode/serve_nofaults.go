//go:build !faults

package main

import (
	"github.com/spf13/pflag"

	idemserver "github.com/idemnode/idemnode/server"
)

// faultFlags is empty in the release build: serve has no fault-injection
// flag (--fault-bug is an unknown flag), and nothing it is given can plant
// a bug. A fault build (`go build -tags faults`) has them (serve_faults.go).
type faultFlags struct{}

func (faultFlags) register(*pflag.FlagSet) {}

func (faultFlags) config() idemserver.Faults { return idemserver.Faults{} }
