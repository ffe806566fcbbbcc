package main

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/idemnode/idemnode/internal/testutil"
)

// TestHealthFollowsReadiness: a node waiting for its peers (bootstrap-expect
// 3, alone) is live but not ready: /readyz answers 503 and the gRPC health
// service NOT_SERVING; a ready node answers SERVING (TestServices in rpc).
func TestHealthFollowsReadiness(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := t.TempDir()
	grpcAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	cmd := exec.Command(binary, "serve", "--node-id", "lonely", "--data-dir", filepath.Join(dir, "data"),
		"--grpc-addr", grpcAddr, "--raft-addr", testutil.FreeAddr(t), "--http-addr", httpAddr,
		"--gossip-addr", testutil.FreeAddr(t), "--api-addr", "", "--bootstrap-expect", "3", "--insecure")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testutil.Eventually(t, 20*time.Second, "health answers NOT_SERVING", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.Status == healthpb.HealthCheckResponse_NOT_SERVING
	})
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusServiceUnavailable} {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}
