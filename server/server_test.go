package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/idemnode/idemnode/internal/testutil"
)

// TestStartServesAStandaloneNode: a standalone node started on ports of
// 0 reports the addresses it bound, becomes ready, answers /readyz, the
// gRPC health service and /metrics (with the API's own series), and
// closes cleanly.
func TestStartServesAStandaloneNode(t *testing.T) {
	t.Parallel()
	srv, err := Start(context.Background(), Config{NodeID: "solo", DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", TLS: TLS{Insecure: true},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for name, addr := range map[string]string{"grpc": srv.GRPCAddr(), "raft": srv.RaftAddr(), "http": srv.HTTPAddr(), "api": srv.APIAddr()} {
		if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
			t.Errorf("%s address %q, want the bound 127.0.0.1 port", name, addr)
		}
	}
	testutil.Eventually(t, 20*time.Second, "the node to be ready", func() bool { return srv.Ready() == nil })
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d, want 200", resp.StatusCode)
	}
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testutil.Eventually(t, 10*time.Second, "health answers SERVING", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && r.Status == healthpb.HealthCheckResponse_SERVING
	})
	resp, err = http.Get("http://" + srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"idemnode_waits_in_progress", `idemnode_listener_max_connections{listener="grpc"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s series", want)
		}
	}
	if err := srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestStartRefusesConfiguration: what the caller got wrong is a
// *ConfigError (serve exits 2 on it), before anything is opened.
func TestStartRefusesConfiguration(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no data dir":    {NodeID: "n"},
		"plaintext":      {NodeID: "n", DataDir: t.TempDir(), GossipAddr: "127.0.0.1:0"},
		"even expect":    {NodeID: "n", DataDir: t.TempDir(), BootstrapExpect: 2, TLS: TLS{Insecure: true}},
		"auth, no creds": {NodeID: "n", DataDir: t.TempDir(), Auth: Auth{Enabled: true}, TLS: TLS{Insecure: true}},
		"small budget":   {NodeID: "n", DataDir: t.TempDir(), MemoryLimit: 64 << 20, TLS: TLS{Insecure: true}},
	} {
		_, err := Start(context.Background(), cfg)
		var invalid *ConfigError
		if !errors.As(err, &invalid) {
			t.Errorf("%s: err = %v, want a *ConfigError", name, err)
		}
	}
}
