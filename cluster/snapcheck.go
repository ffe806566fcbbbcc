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

// checkStoredState checks the data dir's Raft state before raft starts:
// every log entry reads back (verifyLog), a damaged last batch or a log
// that ends before the store is resolved (logtail.go), and the log
// continues where the store ends. The store is raft's snapshot (snapstore.go), so raft will
// replay the log from the store's applied index; a log compacted past it
// would be applied with a hole, and is refused with an ErrCorrupt error.
func (n *Node) checkStoredState(logs raft.LogStore) error {
	start := time.Now()
	if err := verifyLog(logs); err != nil {
		return err
	}
	if first, last, _ := logBounds(logs); last > 0 {
		n.log.Info("verified log", "first", first, "last", last, "took", time.Since(start).Round(time.Millisecond))
	}
	meta := n.fsm.Meta()
	n.log.Info("opened the store", "applied", meta.Applied, "records", meta.Records, "digest", meta.Digest())
	if err := resolveLogTail(logs, n.stores.tailDamage, meta.Applied, n.log); err != nil {
		return err
	}
	return checkLogContinues(logs, meta.Applied)
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
	return fmt.Errorf("raft state is %w: the log starts at entry %d but the store ends at entry %d, so entries %d-%d are missing; %s",
		ErrCorrupt, first, snapIndex, snapIndex+1, first-1, rejoinHint)
}

func corruptSnapshot(id string, err error) error {
	return fmt.Errorf("snapshot %s is %w: %w; %s", id, ErrCorrupt, err, rejoinHint)
}
