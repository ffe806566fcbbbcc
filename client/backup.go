package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// BackupInfo describes a backup saved by Backup.
type BackupInfo struct {
	// File is the absolute path of the backup.
	File         string
	Bytes        int64
	SHA256       string
	AppliedIndex uint64
	Digest       string
	Records      int
}

// LocalError is a failure on this machine (a file that cannot be written,
// a backup damaged in transit), not an answer of the cluster.
type LocalError struct{ Err error }

// Error returns the failure's text.
func (e *LocalError) Error() string { return e.Err.Error() }

// Unwrap returns the failure.
func (e *LocalError) Unwrap() error { return e.Err }

// Backup asks the node at conn for the leader, streams a consistent backup
// from it into file+".partial", checks its size and SHA-256 against the
// summary the leader sends last, and only then renames it to file, so a
// file of that name is always a whole backup. dialLeader connects to the
// leader's address when conn is not the leader (Endpoints.DialLeader).
// gRPC failures are returned as they are; failures here are *LocalError.
func Backup(ctx context.Context, conn *grpc.ClientConn, file string, dialLeader func(addr string) (*grpc.ClientConn, error)) (BackupInfo, error) {
	st, err := idempb.NewAdminClient(conn).Status(ctx, &idempb.StatusRequest{})
	if err != nil {
		return BackupInfo{}, err
	}
	if st.GetState() != "leader" && st.GetLeaderAddr() != "" {
		leader, err := dialLeader(st.GetLeaderAddr())
		if err != nil {
			return BackupInfo{}, err
		}
		defer leader.Close()
		conn = leader
	}
	stream, err := idempb.NewAdminClient(conn).Snapshot(ctx, &idempb.SnapshotRequest{})
	if err != nil {
		return BackupInfo{}, err
	}
	partial := file + ".partial"
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return BackupInfo{}, &LocalError{fmt.Errorf("create %s: %w", partial, err)}
	}
	defer os.Remove(partial) // a no-op after the rename
	h := sha256.New()
	var n int64
	var sum *idempb.SnapshotSummary
	for sum == nil {
		chunk, err := stream.Recv()
		if err != nil {
			f.Close()
			return BackupInfo{}, err
		}
		if _, err := io.MultiWriter(f, h).Write(chunk.GetData()); err != nil {
			f.Close()
			return BackupInfo{}, &LocalError{fmt.Errorf("write %s: %w", partial, err)}
		}
		n += int64(len(chunk.GetData()))
		sum = chunk.GetSummary()
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return BackupInfo{}, &LocalError{fmt.Errorf("write %s: %w", partial, err)}
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != sum.GetSha256() || uint64(n) != sum.GetBytes() {
		return BackupInfo{}, &LocalError{fmt.Errorf("backup damaged in transit: %d bytes sha256 %s, leader sent %d bytes sha256 %s",
			n, got, sum.GetBytes(), sum.GetSha256())}
	}
	if err := os.Rename(partial, file); err != nil {
		return BackupInfo{}, &LocalError{fmt.Errorf("rename backup: %w", err)}
	}
	abs, _ := filepath.Abs(file)
	return BackupInfo{File: abs, Bytes: n, SHA256: got, AppliedIndex: sum.GetAppliedIndex(), Digest: sum.GetDigest(),
		Records: int(sum.GetRecords())}, nil
}
