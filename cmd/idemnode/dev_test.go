package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testutil"
)

// TestTwoDevNodesSideBySide: two --dev nodes on one machine, apart only in
// --data-dir and --grpc-addr, both serve: --dev binds no gossip port (both
// would take 127.0.0.1:7402) and puts Raft, HTTP and the JSON API next to
// --grpc-addr.
func TestTwoDevNodesSideBySide(t *testing.T) {
	t.Parallel()
	needBinary(t)
	addrs := testaddr.New(t)
	for i, ip := range []string{addrs.IP(1), addrs.IP(2)} {
		grpcAddr := freeAddrOn(t, ip)
		host, port, _ := net.SplitHostPort(grpcAddr)
		p, _ := strconv.Atoi(port)
		dir := t.TempDir()
		cmd := exec.Command(binary, "serve", "--dev", "--node-id", fmt.Sprintf("dev%d", i), "--data-dir", filepath.Join(dir, "data"), "--grpc-addr", grpcAddr)
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		httpAddr := net.JoinHostPort(host, strconv.Itoa(p+3))
		testutil.Eventually(t, 30*time.Second, "dev node "+grpcAddr+" ready at "+httpAddr, func() bool {
			select {
			case err := <-exited:
				exited <- err // for the cleanup
				t.Fatalf("dev node %d exited: %v", i, err)
			default:
			}
			resp, err := http.Get("http://" + httpAddr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		if stdout, stderr, code := cli(t, "claim", "--no-fingerprint", "--addr", grpcAddr, "--key", "k", "--owner", "o", "-o", "json"); code != exitOK {
			t.Errorf("claim on dev node %d: exit %d, stdout %q, stderr %q", i, code, stdout, stderr)
		}
		apiURL := "http://" + net.JoinHostPort(host, strconv.Itoa(p+4)) + "/v1/claim"
		resp, err := http.Post(apiURL, "application/json", strings.NewReader(`{"id":{"key":"k2"},"owner":"o"}`))
		if err != nil {
			t.Fatalf("JSON claim on dev node %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `OUTCOME_WON`) {
			t.Errorf("JSON claim on dev node %d at %s: HTTP %d %s", i, apiURL, resp.StatusCode, body)
		}
	}
}

// freeAddrOn returns ip:port with a port that was free a moment ago.
func freeAddrOn(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestDevRefusesNonLoopback: --dev serves in plaintext, so each listener
// given an address off loopback is refused with exit 2, naming its flag,
// before anything listens.
func TestDevRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, addr string }{
		{"--grpc-addr", "0.0.0.0:7400"},
		{"--raft-addr", "[::]:7401"},
		{"--gossip-addr", "192.168.1.20:7402"},
		{"--http-addr", "my-laptop:7403"},
		{"--api-addr", "10.0.0.1:7404"},
	} {
		args := []string{"serve", "--dev", "--data-dir", filepath.Join(t.TempDir(), "data"), tc.flag, tc.addr}
		stdout, stderr, code := cli(t, args...)
		want := tc.flag + ` "` + tc.addr + `" is not a loopback address`
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, stdout, stderr, want)
		}
	}
}
