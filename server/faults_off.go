//go:build !faults

package server

import (
	"log/slog"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc"
)

// Faults is empty in the release build: nothing a server is given can
// plant a bug or shift its clock. A fault build (`go build -tags faults`)
// has the settings (faults_on.go).
type Faults struct{}

func (Faults) apply(*cluster.Config) {}

func (Faults) rpcOptions(*slog.Logger) ([]rpc.Option, error) { return nil, nil }
