package cluster

import (
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
	// LegacyDigest is, for a backup of an in-memory release, the digest
	// (version 1) that release showed for it.
	LegacyDigest string
	// Cluster is the cluster identity: of the state backed up, or the new
	// one a restore gives (hex; "" for a state without one).
	Cluster string
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
	meta, err := n.Machine().Backup(cw)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("write backup: %w", err)
	}
	return BackupInfo{SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: cw.n, Applied: meta.Applied, Digest: meta.Digest(), Records: int(meta.Records),
		Cluster: hex.EncodeToString(meta.Cluster)}, nil
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
// backup is read straight into a new store, checked in full (checksum, sum,
// order, every record) before the store is put in place, with a Raft
// configuration of this one server. `serve` on dataDir then starts a
// one-node cluster holding exactly the backup's state; more servers join it
// empty. The restored state gets a new cluster identity: it seeds a new
// cluster, and the servers of the one backed up (or of any other) refuse
// to replicate with it. A data dir that already holds Raft state is
// refused. Backups of
// the in-memory releases (stream versions 1 and 2) restore too; for those,
// LegacyDigest is the digest that release showed.
func RestoreBackup(dataDir, nodeID, raftAddr string, backup io.Reader) (BackupInfo, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return BackupInfo{}, fmt.Errorf("create data dir: %w", err)
	}
	dirLock, err := lockDataDir(dataDir)
	if err != nil {
		return BackupInfo{}, err
	}
	defer dirLock.Close()
	logs, err := openStores(dataDir, DefaultLogSegmentSize, slog.Default())
	if err != nil {
		return BackupInfo{}, err
	}
	defer logs.Close()
	// A storage fault while the backup is read in fails the restore; the
	// first one is what the caller hears (faulted).
	faults := newFaultReporter(nil)
	faulted := func(err error) error {
		if fault := faults.fault(); fault != nil {
			return fault
		}
		return err
	}
	m, err := openMachine(Config{DataDir: dataDir}, slog.Default(), faults.report)
	if err != nil {
		return BackupInfo{}, faulted(err)
	}
	defer m.Close()
	existing, err := raft.HasExistingState(logs.log, logs.stable, newStoreSnapshots(func() *fsm.Machine { return m }))
	if err != nil {
		return BackupInfo{}, fmt.Errorf("inspect data dir %s: %w", dataDir, err)
	}
	if existing {
		return BackupInfo{}, fmt.Errorf("data dir %s already holds Raft state: restore into an empty one", dataDir)
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(nodeID), Address: raft.ServerAddress(raftAddr)}}}
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(backup, h)}
	info, err := m.RestoreWith(cr, fsm.Meta{Term: 1, Config: raft.EncodeConfiguration(conf), Cluster: NewClusterID()})
	if err != nil {
		if fault := faulted(nil); fault != nil {
			return BackupInfo{}, fault
		}
		return BackupInfo{}, fmt.Errorf("backup is not usable: %w", err)
	}
	// The first election must start above the term the store's index holds.
	if err := logs.stable.SetUint64([]byte("CurrentTerm"), max(info.Meta.Term, 1)); err != nil {
		return BackupInfo{}, fmt.Errorf("store term: %w", err)
	}
	return BackupInfo{SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: cr.n, Applied: info.Meta.Applied,
		Digest: info.Meta.Digest(), Records: int(info.Meta.Records), LegacyDigest: info.LegacyDigest, Cluster: hex.EncodeToString(info.Meta.Cluster)}, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
