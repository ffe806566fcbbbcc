//go:build !faults

package main

import (
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc"
)

// faultFlags is empty in the release build: serve has no fault-injection
// flag (--fault-bug is an unknown flag), and nothing it is given can plant
// a bug. A fault build (`go build -tags faults`) has them (serve_faults.go).
type faultFlags struct{}

func (faultFlags) register(*pflag.FlagSet) {}

func (faultFlags) clock() clock.Clock { return nil }

func (faultFlags) cluster() cluster.Faults { return cluster.Faults{} }

func (faultFlags) rpcOptions(*slog.Logger) ([]rpc.Option, error) { return nil, nil }
