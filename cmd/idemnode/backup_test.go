package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

type backupJSON struct {
	File         string `json:"file"`
	SHA256       string `json:"sha256"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
	Records      int    `json:"records"`
	ClusterID    string `json:"cluster_id"`
}

// TestBackupUnderLoadRestoresIntoNewNode takes a backup while clients
// write, restores it into an empty data dir, and starts a new single node
// from it: its digest is the backup's, and a damaged backup is refused.
func TestBackupUnderLoadRestoresIntoNewNode(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	conn, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := idempb.NewIdempotencyClient(conn)
	var writes atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				_, err := api.Claim(ctx, &idempb.ClaimRequest{Id: &idempb.RecordId{Key: fmt.Sprintf("w%d-%d", w, i)}, Owner: "o"})
				if err == nil {
					writes.Add(1)
				}
			}
		}()
	}
	testutil.Eventually(t, 30*time.Second, "load running", func() bool { return writes.Load() > 50 })
	file := filepath.Join(t.TempDir(), "backup.snap")
	var saved backupJSON
	s.cliJSON(0, &saved, "snapshot", "save", file)
	stop()
	wg.Wait()
	if saved.Records < 50 || len(saved.SHA256) != 64 || len(saved.Digest) != 64 {
		t.Fatalf("backup summary: %+v", saved)
	}

	fresh := &server{t: t, dataDir: filepath.Join(t.TempDir(), "data"), logPath: filepath.Join(t.TempDir(), "log"),
		grpc: testutil.FreeAddr(t), raft: testutil.FreeAddr(t), http: testutil.FreeAddr(t), gossip: testutil.FreeAddr(t),
		serveFlags: []string{"--insecure"}}
	var restored backupJSON
	out, stderr, code := cli(t, "snapshot", "restore", file, "--data-dir", fresh.dataDir, "--node-id", "n1", "--raft-addr", fresh.raft, "-o", "json")
	if err := json.Unmarshal([]byte(out), &restored); code != 0 || err != nil {
		t.Fatalf("restore: exit %d, %v, stdout %q, stderr %q", code, err, out, stderr)
	}
	if restored.Digest != saved.Digest || restored.SHA256 != saved.SHA256 {
		t.Fatalf("restore checked %+v, saved %+v", restored, saved)
	}
	t.Cleanup(fresh.kill)
	// The Raft address is in the restored configuration; the other ports
	// were free when picked, and another test's process may have taken one
	// since: then start again on fresh ones.
	for attempt := 1; ; attempt++ {
		fresh.launch()
		err := fresh.awaitReady()
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		fresh.grpc, fresh.http, fresh.gossip = testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	}
	var st struct {
		Digest    string `json:"digest"`
		Records   int    `json:"records"`
		ClusterID string `json:"cluster_id"`
	}
	fresh.cliJSON(0, &st, "status")
	if restored.ClusterID == "" || st.ClusterID != restored.ClusterID {
		t.Fatalf("the restored node holds cluster %q, restore said it seeds a new cluster %q", st.ClusterID, restored.ClusterID)
	}
	if st.Digest != saved.Digest || st.Records != saved.Records {
		t.Fatalf("new node: digest %s records %d, backup: digest %s records %d", st.Digest, st.Records, saved.Digest, saved.Records)
	}

	// A second restore into the same dir, and a truncated backup, are refused.
	_, stderr, code = cli(t, "snapshot", "restore", file, "--data-dir", fresh.dataDir, "--node-id", "n1", "--raft-addr", fresh.raft)
	if code != 2 || stderr == "" {
		t.Fatalf("restore into a used data dir: exit %d, stderr %q", code, stderr)
	}
	b, _ := os.ReadFile(file)
	short := filepath.Join(t.TempDir(), "short.snap")
	if err := os.WriteFile(short, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = cli(t, "snapshot", "restore", short, "--data-dir", filepath.Join(t.TempDir(), "d"), "--node-id", "n1", "--raft-addr", fresh.raft)
	if code != 2 || stderr == "" {
		t.Fatalf("truncated backup: exit %d, stderr %q", code, stderr)
	}
}
