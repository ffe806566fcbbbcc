package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/hashicorp/raft-wal/segment"
)

// A node's durable Raft state lives in two stores. The log is append-only
// segment files (raft-wal) under <data>/wal: an append is one write and one
// sync into a zero-filled file (segmentfiles.go), where bolt's copy-on-write
// B-tree needs two fsyncs and rewrites pages. The log append sits on every write's
// critical path twice (leader, then follower), and measured on the claim
// benchmark the switch cut dispatch-to-commit from 2.8 to 1.8 ms
// (docs/PERFORMANCE.md). The term and vote, written only at elections, stay
// in bolt (raft.db), where they always were.
const (
	walDir     = "wal"
	walTempDir = "wal.migrating"
	boltFile   = "raft.db"
	// DefaultLogSegmentSize is the size each log segment file is
	// zero-filled to; one more is kept ready.
	DefaultLogSegmentSize = 64 << 20
	// migrateBatchBytes groups copied entries into appends of about this size.
	migrateBatchBytes = 4 << 20
)

// stores holds a node's open Raft log and stable store.
type stores struct {
	log    *raftwal.WAL
	segs   *zeroedSegments
	stable *raftboltdb.BoltStore
	// tailDamage is a damaged last batch found before raft-wal dropped it
	// (logtail.go).
	tailDamage tailDamage
}

// openStores opens (creating when absent) the stores in dataDir. A data dir
// written before the log moved out of bolt has its entries moved first.
func openStores(dataDir string, segmentSize int, log *slog.Logger) (*stores, error) {
	stable, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dataDir, boltFile), BoltOptions: boltOptions()})
	if err != nil {
		return nil, fmt.Errorf("open stable store in %s (is another node running on it?): %w", dataDir, err)
	}
	s := &stores{stable: stable}
	if err := moveLogOutOfBolt(dataDir, stable, segmentSize, log); err != nil {
		stable.Close()
		return nil, err
	}
	if s.tailDamage, err = scanLogTail(filepath.Join(dataDir, walDir)); err != nil {
		stable.Close()
		return nil, err
	}
	if s.log, s.segs, err = openWAL(filepath.Join(dataDir, walDir), segmentSize); err != nil {
		stable.Close()
		return nil, err
	}
	return s, nil
}

// openWAL opens the log in dir with zero-filled segments (segmentfiles.go);
// close the segments after the log.
func openWAL(dir string, segmentSize int) (*raftwal.WAL, *zeroedSegments, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create log dir: %w", err)
	}
	segs := newZeroedSegments(dir, int64(segmentSize))
	w, err := raftwal.Open(dir, raftwal.WithSegmentSize(segmentSize), raftwal.WithSegmentFiler(segment.NewFiler(dir, segs)))
	if err != nil {
		segs.Close()
		return nil, nil, fmt.Errorf("open log store in %s: %w", dir, err)
	}
	return w, segs, nil
}

// moveLogOutOfBolt copies the entries an older data dir holds in raft.db
// into a new log, and only then drops them from bolt. The copy is built in
// a temporary directory and renamed into place, so a crash at any point
// leaves either the old layout, redone at the next start, or the complete
// new log.
func moveLogOutOfBolt(dataDir string, bolt *raftboltdb.BoltStore, segmentSize int, log *slog.Logger) error {
	last, err := bolt.LastIndex()
	if err != nil {
		return fmt.Errorf("read log index in %s: %w", boltFile, err)
	}
	if last == 0 {
		return nil
	}
	first, err := bolt.FirstIndex()
	if err != nil {
		return fmt.Errorf("read log index in %s: %w", boltFile, err)
	}
	final := filepath.Join(dataDir, walDir)
	if _, err := os.Stat(final); errors.Is(err, os.ErrNotExist) {
		start := time.Now()
		log.Info("moving the raft log out of "+boltFile, "first", first, "last", last)
		if err := copyLog(dataDir, bolt, segmentSize); err != nil {
			return fmt.Errorf("move the log out of %s: %w", boltFile, err)
		}
		log.Info("moved the raft log into "+walDir, "entries", last-first+1, "took", time.Since(start).Round(time.Millisecond))
	} else if err != nil {
		return fmt.Errorf("inspect log dir: %w", err)
	}
	if err := bolt.DeleteRange(first, last); err != nil {
		return fmt.Errorf("drop the moved log from %s: %w", boltFile, err)
	}
	return nil
}

func copyLog(dataDir string, src raft.LogStore, segmentSize int) error {
	tmp := filepath.Join(dataDir, walTempDir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	dst, segs, err := openWAL(tmp, segmentSize)
	if err != nil {
		return err
	}
	err = migrate.CopyLogs(context.Background(), dst, src, migrateBatchBytes, nil)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	segs.Close()
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, walDir)); err != nil {
		return err
	}
	return syncDir(dataDir)
}

// Close closes both stores.
func (s *stores) Close() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
		s.segs.Close()
	}
	errs = append(errs, s.stable.Close())
	return errors.Join(errs...)
}
