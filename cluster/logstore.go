package cluster

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hashicorp/raft"
)

// guardedLogStore wraps the Raft log store with a write watchdog and, for
// fault-injection runs, a stall switch.
//
// The watchdog is a workaround for a known hashicorp/raft hazard: the
// leader appends to its log inside its main loop, so a leader whose disk
// hangs keeps sending heartbeats from its replication goroutines while
// committing nothing, and the whole cluster hangs with it. A node whose log
// write takes longer than the stall timeout therefore exits (crash-only):
// the followers elect a healthy leader, and the supervisor restarts this
// node, which recovers from its log like after any crash.
type guardedLogStore struct {
	raft.LogStore
	stallTimeout time.Duration
	// stallFile, when set, is the fault-injection switch: while the file
	// exists, writes block (a stalled disk).
	stallFile string
	log       *slog.Logger
	exit      func(code int)
}

// StoreLog stores one entry under the watchdog.
func (g *guardedLogStore) StoreLog(l *raft.Log) error {
	return g.guard(func() error { return g.LogStore.StoreLog(l) })
}

// StoreLogs stores entries under the watchdog.
func (g *guardedLogStore) StoreLogs(logs []*raft.Log) error {
	return g.guard(func() error { return g.LogStore.StoreLogs(logs) })
}

func (g *guardedLogStore) guard(write func() error) error {
	if g.stallTimeout <= 0 && g.stallFile == "" {
		return write()
	}
	done := make(chan struct{})
	if g.stallTimeout > 0 {
		timer := time.AfterFunc(g.stallTimeout, func() {
			select {
			case <-done:
			default:
				g.log.Error("raft log write stalled; exiting so a healthy node can lead", "timeout", g.stallTimeout)
				g.exit(3)
			}
		})
		defer timer.Stop()
	}
	defer close(done)
	g.waitWhileStalled()
	if err := write(); err != nil {
		return fmt.Errorf("store raft log: %w", err)
	}
	return nil
}

// waitWhileStalled blocks while the stall file exists (fault injection).
func (g *guardedLogStore) waitWhileStalled() {
	if g.stallFile == "" {
		return
	}
	for {
		if _, err := os.Stat(g.stallFile); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
