//go:build faults

package cluster

import (
	"os"
	"path/filepath"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

// Faults are the fault-injection switches of the jepsen harness, compiled
// only into a fault build (`go build -tags faults`, as etcd compiles its
// gofail points only into failpoint builds). faults_off.go is the release
// build's: empty, so a mistyped deployment flag or config cannot reach them.
type Faults struct {
	// DiskStallFile: while this file exists, Raft log writes block (a
	// stalled disk).
	DiskStallFile string
	// AppliedAhead plants the store bug applied-ahead (appliedahead.go)
	// for the jepsen self-test.
	AppliedAhead bool
}

// wrapStore returns the node's store, planted with applied-ahead when asked.
func (f Faults) wrapStore(st fsm.Store, dataDir string) fsm.Store {
	if !f.AppliedAhead {
		return st
	}
	return &appliedAheadStore{Store: st, path: filepath.Join(dataDir, appliedAheadFile)}
}

// waitWhileStalled blocks while the stall file exists.
func (f Faults) waitWhileStalled() {
	if f.DiskStallFile == "" {
		return
	}
	for {
		if _, err := os.Stat(f.DiskStallFile); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
