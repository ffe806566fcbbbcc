package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// TestProxyCommand runs `idemnode proxy` in front of the Python test
// upstream and a node: a guarded POST runs once and is replayed, the
// proxy's own port answers /healthz, /readyz and /metrics, and bad flags
// or a bad routes file exit 2 naming the problem.
func TestProxyCommand(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	upstream := startPythonUpstream(t)
	listen, ops := testutil.FreeAddr(t), testutil.FreeAddr(t)
	routes := filepath.Join(t.TempDir(), "routes.yaml")
	writeFile(t, routes, "routes:\n  - match: POST /charges\n    ttl: 1h\n")
	cmd := exec.Command(binary, "proxy", "--listen", listen, "--upstream", "http://"+upstream, "--cluster", s.grpc,
		"--routes", routes, "--http-addr", ops)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testutil.Eventually(t, 20*time.Second, "the proxy ready", func() bool { return get(t, "http://"+ops+"/readyz") == 200 })

	post := func() (int, string, string) {
		req, _ := http.NewRequest("POST", "http://"+listen+"/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", "cli-proxy-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
	}
	code, first, _ := post()
	code2, second, replayed := post()
	if code != 201 || code2 != 201 || first != second || replayed != "true" || !strings.Contains(first, `"count": 1`) {
		t.Fatalf("first HTTP %d %s; second HTTP %d %s replayed %q", code, first, code2, second, replayed)
	}
	if get(t, "http://"+ops+"/healthz") != 200 {
		t.Error("/healthz")
	}
	resp, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`idemnode_proxy_requests_total{outcome="executed"} 1`, `idemnode_proxy_requests_total{outcome="replayed"} 1`,
		`idemnode_proxy_upstream_seconds_count{result="response"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, "routes: [{match: POST /x, ttl: 1s}]\n")
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"proxy"}, "--upstream: want an http:// or https:// URL"},
		{[]string{"proxy", "--upstream", "ftp://x"}, "--upstream: want an http:// or https:// URL"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--cluster", "nohost"}, `--cluster: "nohost" is not host:port`},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--routes", bad}, "routes[0] (POST /x): ttl: 1s"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--routes", bad, "--tenant-header", "X-T"}, "--tenant-header goes in the routes file"},
	} {
		if _, stderr, code := cli(t, tc.args...); code != exitUsage || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.stderr)
		}
	}
}

// startPythonUpstream runs proxy/testdata/upstream.py on a free port.
func startPythonUpstream(t *testing.T) string {
	t.Helper()
	addr := testutil.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("python3", "../../proxy/testdata/upstream.py", port)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("python3 (.ci/run installs it): %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("upstream: %q %v", line, err)
	}
	return addr
}

func get(t *testing.T, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
