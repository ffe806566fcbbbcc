//go:build !faults

package cluster

import "github.com/idemnode/idemnode/fsm"

// Faults is empty in the release build: the fault-injection switches
// (faults_on.go) and the planted store bug exist only in a fault build
// (`go build -tags faults`). Its methods do nothing and inline away.
type Faults struct{}

// wrapStore returns st: the release build plants nothing.
func (Faults) wrapStore(st fsm.Store, _ string) fsm.Store { return st }

// waitWhileStalled returns at once: the release build has no stall switch.
func (Faults) waitWhileStalled() {}
