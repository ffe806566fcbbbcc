package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// BackupInfo describes a backup written by Backup or checked by
// RestoreBackup.
type BackupInfo struct {
	SHA256  string
	Bytes   int64
	Applied uint64
	Digest  string
	Records int
}

// Backup writes a consistent backup of the state to w: it confirms
// leadership and waits until every write committed before the call is
// applied (a linearizable read), then streams the state-machine snapshot.
func (n *Node) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	if err := n.LinearizableBarrier(ctx); err != nil {
		return BackupInfo{}, err
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(w, h)}
	applied, digest, records, err := n.Machine().Backup(cw)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("write backup: %w", err)
	}
	return BackupInfo{SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: cw.n, Applied: applied, Digest: digest, Records: records}, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// RestoreBackup seeds dataDir with a backup, for disaster recovery: the
// backup is checked in full (checksum, order, every record) before anything
// is written, then stored as a Raft snapshot whose configuration is this one
// server. `serve` on dataDir then starts a one-node cluster holding exactly
// the backup's state; more servers join it as usual. A data dir that already
// holds Raft state is refused.
func RestoreBackup(dataDir, nodeID, raftAddr string, backup []byte) (BackupInfo, error) {
	m := fsm.NewMachine()
	if err := m.Restore(bytesReader(backup)); err != nil {
		return BackupInfo{}, fmt.Errorf("backup is not usable: %w", err)
	}
	applied, digest := m.DigestAt()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return BackupInfo{}, fmt.Errorf("create data dir: %w", err)
	}
	store, err := openStores(dataDir, DefaultLogSegmentSize, slog.Default())
	if err != nil {
		return BackupInfo{}, err
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("open snapshot store: %w", err)
	}
	existing, err := raft.HasExistingState(store.log, store.stable, snaps)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
	if existing {
		return BackupInfo{}, fmt.Errorf("data dir %s already holds Raft state: restore into an empty one", dataDir)
	}
	index := max(applied, 1)
	cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(nodeID), Address: raft.ServerAddress(raftAddr)}}}
	// The snapshot store encodes the peers through a transport (a legacy
	// format); an in-memory one serves, as nothing is sent.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr))
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, cfg, index, trans)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("create snapshot: %w", err)
	}
	if _, err := sink.Write(backup); err != nil {
		sink.Cancel()
		return BackupInfo{}, fmt.Errorf("write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return BackupInfo{}, fmt.Errorf("close snapshot: %w", err)
	}
	// Raft restores the snapshot but keeps its term; record term 1 so the
	// first election starts above it.
	if err := store.stable.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		return BackupInfo{}, fmt.Errorf("store term: %w", err)
	}
	sum := sha256.Sum256(backup)
	return BackupInfo{SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(backup)), Applied: applied, Digest: digest, Records: m.Len()}, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
