package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/store"
)

// The state machine's records live in a Pebble store under <data>/fsm
// (store/DESIGN.md). Raft's snapshots are that store (snapstore.go).
const (
	storeDir = "fsm"
	// legacySnapshotDir held the full snapshots of the in-memory releases.
	legacySnapshotDir = "snapshots"
)

// openMachine opens the node's store and the Machine over it. A data dir of
// an in-memory release (full snapshots and a log, no store) is migrated
// first: raft will not restore its snapshot (the node starts raft with
// NoSnapshotRestoreOnStart, and the store is raft's snapshot from now on),
// so the newest one is loaded into a new store here, and raft then replays
// the log after it.
//
// fatal receives a store fault: the same as a failed log write, since the
// disk is at fault either way.
func openMachine(cfg Config, log *slog.Logger, fatal func(error)) (*fsm.Machine, error) {
	dir := filepath.Join(cfg.DataDir, storeDir)
	s, err := store.Open(dir, store.Options{
		CacheSize: cfg.StoreCacheSize, MemTableSize: cfg.StoreMemTableSize, KeyFilterSize: cfg.StoreKeyFilterSize,
		Fatal: func(err error) {
			log.Error("the store failed: stopping", "err", err, "advice", failureAdvice(err))
			fatal(fmt.Errorf("%w: the store: %w", ErrStorageFault, err))
		},
	})
	if err != nil {
		return nil, storeError(dir, err)
	}
	m, err := fsm.New(cfg.Faults.wrapStore(s, cfg.DataDir))
	if err != nil {
		s.Close()
		return nil, storeError(dir, err)
	}
	// An empty store beside old snapshots is a migration to do (again, if a
	// crash cut one short: the migrated store replaces the empty one
	// atomically, so a store holding state means the migration finished).
	// A store holding state beside them is one whose migration finished
	// but for removing them.
	if m.Applied() == 0 {
		err = migrateLegacySnapshot(cfg.DataDir, m, log)
	} else {
		err = os.RemoveAll(filepath.Join(cfg.DataDir, legacySnapshotDir))
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func storeError(dir string, err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return fmt.Errorf("the store in %s is %w: %w; %s", dir, ErrCorrupt, err, rejoinHint)
	}
	return fmt.Errorf("open the store in %s: %w", dir, err)
}

// migrateLegacySnapshot loads the newest full snapshot of an in-memory
// release into the new store, with the term and configuration raft recorded
// beside it, then removes the old snapshots (only once the store holding
// them is durable, so a crash before that redoes the migration).
func migrateLegacySnapshot(dataDir string, m *fsm.Machine, log *slog.Logger) error {
	dir := filepath.Join(dataDir, legacySnapshotDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := checkSnapshotMetas(dir); err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStore(dataDir, 1, io.Discard)
	if err != nil {
		return fmt.Errorf("open the snapshots to migrate: %w", err)
	}
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list the snapshots to migrate: %w", err)
	}
	if len(list) > 0 {
		start := time.Now()
		newest := list[0]
		meta, rc, err := snaps.Open(newest.ID)
		if err != nil {
			return corruptSnapshot(newest.ID, err)
		}
		base := fsm.Meta{Term: meta.Term, ConfigIndex: meta.ConfigurationIndex, Config: raft.EncodeConfiguration(meta.Configuration)}
		info, err := m.RestoreWith(rc, base)
		rc.Close()
		if err != nil {
			return corruptSnapshot(newest.ID, err)
		}
		log.Info("migrated the newest snapshot of an in-memory release into the store", "id", newest.ID,
			"index", info.Meta.Applied, "records", info.Meta.Records, "digest_v1", info.LegacyDigest,
			"took", time.Since(start).Round(time.Millisecond))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the migrated snapshots: %w", err)
	}
	return syncDir(dataDir)
}
