package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// loadStoredState checks the data dir's Raft state before raft starts: it
// reads back every log entry (verifyLog), restores the newest snapshot
// into the state machine, and checks that the log continues where the
// snapshot ends. Any defect refuses the start with an ErrCorrupt error.
//
// Left to itself, raft tries the snapshots newest first and quietly falls
// back to an older one (or to none) when one does not read back; if the log
// was compacted past the older snapshot, the node then applies a log with a
// hole — it serves state its peers never had, or panics later on a missing
// entry. Here a damaged snapshot stops the node with an error naming it,
// and raft, started with NoSnapshotRestoreOnStart, takes the index and
// configuration from the same snapshot's metadata without reading it again.
func (n *Node) loadStoredState(snaps *raft.FileSnapshotStore, logs raft.LogStore) error {
	start := time.Now()
	if err := verifyLog(logs); err != nil {
		return err
	}
	if first, last, _ := logBounds(logs); last > 0 {
		n.log.Info("verified log", "first", first, "last", last, "took", time.Since(start).Round(time.Millisecond))
	}
	if err := checkSnapshotMetas(filepath.Join(n.cfg.DataDir, "snapshots")); err != nil {
		return err
	}
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	var snapIndex uint64
	if len(list) > 0 {
		start := time.Now()
		newest := list[0]
		_, rc, err := snaps.Open(newest.ID)
		if err != nil {
			return corruptSnapshot(newest.ID, err)
		}
		if err := n.fsm.Restore(rc); err != nil {
			return corruptSnapshot(newest.ID, err)
		}
		snapIndex = newest.Index
		n.log.Info("restored snapshot", "id", newest.ID, "index", newest.Index, "records", n.fsm.Len(),
			"took", time.Since(start).Round(time.Millisecond))
	}
	return checkLogContinues(logs, snapIndex)
}

// checkSnapshotMetas refuses a snapshot directory whose meta.json does not
// parse: the snapshot store would skip it without a word and use an older
// snapshot, or none.
func checkSnapshotMetas(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read snapshot dir: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue // an unfinished snapshot, which the store ignores and reaps
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err == nil {
			var meta raft.SnapshotMeta
			err = json.Unmarshal(b, &meta)
		}
		if err != nil {
			return corruptSnapshot(e.Name(), fmt.Errorf("metadata: %w", err))
		}
	}
	return nil
}

// checkLogContinues refuses a log that starts after the entry following the
// snapshot: the entries between were compacted away with a snapshot that is
// no longer there.
func checkLogContinues(logs raft.LogStore, snapIndex uint64) error {
	first, last, err := logBounds(logs)
	if err != nil || last == 0 || first <= snapIndex+1 {
		return err
	}
	return fmt.Errorf("raft state is %w: the log starts at entry %d but the newest snapshot ends at entry %d, so entries %d-%d are missing; %s",
		ErrCorrupt, first, snapIndex, snapIndex+1, first-1, rejoinHint)
}

func corruptSnapshot(id string, err error) error {
	return fmt.Errorf("snapshot %s is %w: %w; %s", id, ErrCorrupt, err, rejoinHint)
}
