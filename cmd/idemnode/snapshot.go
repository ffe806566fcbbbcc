package main

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc/idempb"
)

type backupView struct {
	File         string `json:"file"`
	Bytes        int64  `json:"bytes"`
	SHA256       string `json:"sha256"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
	Records      int    `json:"records"`
	// LegacyDigest is set when restoring a backup of an in-memory release:
	// the digest (version 1) that release showed, to compare with it.
	LegacyDigest string `json:"digest_v1,omitempty"`
	// ClusterID is, after a restore, the new cluster's identity: the
	// restored node seeds a new cluster, which the old one's servers
	// refuse to replicate with.
	ClusterID string `json:"cluster_id,omitempty"`
}

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Back up a cluster's state, or seed a new node from a backup"}
	cmd.AddCommand(newSnapshotSaveCmd(), newSnapshotRestoreCmd())
	return cmd
}

func newSnapshotSaveCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:     "save FILE",
		Short:   "Save a consistent backup from the leader into FILE (checked against its SHA-256)",
		Example: "  idemnode snapshot save backup.snap --addr 127.0.0.11:7400,127.0.0.12:7400 -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				b, err := cl.Backup(ctx, args[0])
				if err != nil {
					return err
				}
				return c.print(backupView{File: b.File, Bytes: b.Bytes, SHA256: b.SHA256, AppliedIndex: b.AppliedIndex,
					Digest: b.Digest, Records: b.Records}, idempb.Outcome_OUTCOME_OK)
			})
		},
	}
	c.register(cmd, false)
	return cmd
}

func newSnapshotRestoreCmd() *cobra.Command {
	var dataDir, nodeID, raftAddr, output string
	cmd := &cobra.Command{
		Use:     "restore FILE",
		Short:   "Seed an empty data dir from a backup; `serve` on it then starts a one-node cluster with that state",
		Example: "  idemnode snapshot restore backup.snap --data-dir /data --node-id node1 --raft-addr 10.0.0.1:7401",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" || nodeID == "" || raftAddr == "" {
				return fmt.Errorf("--data-dir, --node-id and --raft-addr are required (use the ones serve will run with)")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o must be text or json, got %q", output)
			}
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("read backup: %w", err)
			}
			defer f.Close()
			info, err := cluster.RestoreBackup(dataDir, nodeID, raftAddr, bufio.NewReaderSize(f, 1<<20))
			if err != nil {
				return fmt.Errorf("restore %s: %w", args[0], err)
			}
			c := clientFlags{output: output}
			return c.print(backupView{File: args[0], Bytes: info.Bytes, SHA256: info.SHA256, AppliedIndex: info.Applied,
				Digest: info.Digest, Records: info.Records, LegacyDigest: info.LegacyDigest, ClusterID: info.Cluster}, idempb.Outcome_OUTCOME_OK)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dataDir, "data-dir", "", "empty data dir of the new node")
	fl.StringVar(&nodeID, "node-id", "", "node id the new node will serve with")
	fl.StringVar(&raftAddr, "raft-addr", "", "raft address the new node will serve with")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
