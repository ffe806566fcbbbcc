package cluster

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// guardedLogStore makes the Raft log crash-only: a write that fails or
// hangs is a storage fault (Config.OnFatal), on which the process ends, and
// the supervisor's restart recovers the log from what is on disk, like after
// any crash. It also holds, in a fault build,
// a stall switch, and answers a compacted entry as not found (GetLog).
//
// A failed write: after an append fails (a full disk, an I/O error, a
// failed fsync) the log store's in-memory position may be ahead of the
// file, and an fsync error leaves the page cache claiming data the disk may
// not have; only a fresh read from disk is trustworthy (etcd and PostgreSQL
// answer the same way). A hung write is a known hashicorp/raft hazard: the
// leader appends inside its main loop, so a leader whose disk hangs keeps
// sending heartbeats from its replication goroutines while committing
// nothing, and the whole cluster hangs with it. In both cases the other
// nodes elect a healthy leader.
type guardedLogStore struct {
	raft.LogStore
	stallTimeout time.Duration
	// faults holds the stall switch of a fault build (faults_on.go); the
	// release build's is empty and its wait compiles to nothing.
	faults Faults
	log    *slog.Logger
	// fatal reports a storage fault (Node.storageFault).
	fatal func(error)
	// keepLogOnce answers raft's question after the next installed
	// snapshot (install.go).
	keepLogOnce atomic.Bool
}

// StoreLog stores one entry under the watchdog.
func (g *guardedLogStore) StoreLog(l *raft.Log) error {
	return g.guard(func() error { return g.LogStore.StoreLog(l) })
}

// StoreLogs stores entries under the watchdog.
func (g *guardedLogStore) StoreLogs(logs []*raft.Log) error {
	return g.guard(func() error { return g.LogStore.StoreLogs(logs) })
}

// DeleteRange truncates the log under the watchdog.
func (g *guardedLogStore) DeleteRange(first, last uint64) error {
	return g.guard(func() error { return g.LogStore.DeleteRange(first, last) })
}

// GetLog refuses an entry before the log's first index as not found.
// raft-wal truncates the head of a segment by moving the segment's first
// index in its metadata and still reads an entry below it from the file
// until the whole segment is deleted, so without this check raft, asked
// for a compacted entry, gets it: a follower that lagged past the last
// snapshot was then replayed from the log or sent a snapshot depending on
// where a segment boundary fell (TestRestartAfterSnapshotsCatchesUp).
func (g *guardedLogStore) GetLog(index uint64, l *raft.Log) error {
	first, err := g.LogStore.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return g.LogStore.GetLog(index, l)
}

func (g *guardedLogStore) guard(write func() error) error {
	if g.stallTimeout > 0 {
		done := make(chan struct{})
		timer := time.AfterFunc(g.stallTimeout, func() {
			select {
			case <-done:
			default:
				g.log.Error("raft log write stalled; stopping so a healthy node can lead", "timeout", g.stallTimeout)
				g.fatal(fmt.Errorf("%w: a raft log write stalled for more than %s", ErrStorageFault, g.stallTimeout))
			}
		})
		defer timer.Stop()
		defer close(done)
	}
	g.faults.waitWhileStalled()
	if err := write(); err != nil {
		g.log.Error("raft log write failed; stopping so that a restart recovers the log from disk", "err", err, "advice", failureAdvice(err))
		err = fmt.Errorf("store raft log: %w", err)
		g.fatal(fmt.Errorf("%w: %w", ErrStorageFault, err))
		return err
	}
	return nil
}
