package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testmain"
	"github.com/idemnode/idemnode/proxy"
)

// shared is a three-node cluster for the tests that do not stop nodes.
var shared *testcluster.Cluster

func TestMain(m *testing.M) {
	tb := testmain.New("proxy")
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		shared = testcluster.Start(tb, 3, testcluster.Options{JSON: true})
	}
	code := m.Run()
	tb.Close()
	os.Exit(code)
}

// upstream is testdata/upstream.py, a service that is not Go, counting
// how often each key ran.
type upstream struct {
	t    testing.TB
	addr string
	cmd  *exec.Cmd
	// jsonAPI is the cluster's JSON API that /rides records steps through.
	jsonAPI string
}

// startUpstream runs the Python upstream on a free port; t.Cleanup kills it.
func startUpstream(t testing.TB) *upstream {
	t.Helper()
	return startUpstreamWith(t, "")
}

// startUpstreamWith is startUpstream for an upstream that records steps
// through the JSON API at jsonAPI.
func startUpstreamWith(t testing.TB, jsonAPI string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u := &upstream{t: t, addr: addr, jsonAPI: jsonAPI}
	u.start()
	t.Cleanup(u.kill)
	return u
}

func (u *upstream) start() {
	u.t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		u.t.Fatal("python3 is needed for the proxy's non-Go upstream (.ci/run installs it)")
	}
	_, port, _ := net.SplitHostPort(u.addr)
	u.cmd = exec.Command("python3", "testdata/upstream.py", port, u.jsonAPI)
	out, err := u.cmd.StdoutPipe()
	if err != nil {
		u.t.Fatal(err)
	}
	u.cmd.Stderr = os.Stderr
	if err := u.cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		u.t.Fatalf("upstream did not start: %q %v", line, err)
	}
}

// kill ends the upstream at once, as kill -9 does.
func (u *upstream) kill() {
	if u.cmd != nil && u.cmd.Process != nil {
		_ = u.cmd.Process.Kill()
		_ = u.cmd.Wait()
	}
}

func (u *upstream) url() *url.URL { return &url.URL{Scheme: "http", Host: u.addr} }

// runs is how often key ran on this upstream process.
func (u *upstream) runs(key string) int {
	u.t.Helper()
	resp, err := http.Get("http://" + u.addr + "/count?key=" + url.QueryEscape(key))
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		u.t.Fatal(err)
	}
	return c.Count
}

// goUpstream is an upstream in Go, for the answers the Python one cannot
// give on cue: a body that trickles, breaks off or runs to many megabytes.
// hits counts the requests it got.
type goUpstream struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func startGoUpstream(t testing.TB, h http.HandlerFunc) *goUpstream {
	t.Helper()
	u := &goUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *goUpstream) url() *url.URL {
	v, _ := url.Parse(u.srv.URL)
	return v
}

// startProxy serves a proxy in front of up over c with routes (nil: the
// defaults) and returns its base URL and the registry of its metrics.
func startProxy(t testing.TB, c *testcluster.Cluster, up *upstream, routes *proxy.Routes, tune ...func(*client.Config)) (string, *prometheus.Registry) {
	t.Helper()
	return startProxyTo(t, c, proxy.Config{Upstream: up.url(), Routes: routes}, tune...)
}

// startProxyTo serves a proxy of pcfg (its Upstream, Routes and timeouts)
// over c and returns its base URL and the registry of its metrics.
func startProxyTo(t testing.TB, c *testcluster.Cluster, pcfg proxy.Config, tune ...func(*client.Config)) (string, *prometheus.Registry) {
	t.Helper()
	cfg := client.Config{Timeout: 20 * time.Second}
	for _, nd := range c.Nodes {
		cfg.Addrs = append(cfg.Addrs, nd.GRPCAddr())
	}
	for _, f := range tune {
		f(&cfg)
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	reg := prometheus.NewRegistry()
	pcfg.Client, pcfg.Metrics = cl, reg
	h, err := proxy.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, reg
}

// reply is an answer with its body read.
type reply struct {
	status int
	header http.Header
	body   string
}

// send sends a request with the key (none when "") and extra header pairs.
// It may run on goroutines of its own: a transport error is reported with
// Errorf and answered as status 0, which every caller's check refuses.
func send(t testing.TB, method, url, key, body string, header ...string) reply {
	t.Helper()
	r, err := sendOrFail(method, url, key, body, header...)
	if err != nil {
		t.Error(err)
	}
	return r
}

// sendOrFail is send for a request whose transport may fail: it returns
// the error (an empty reply, a connection cut mid-body) instead.
func sendOrFail(method, url, key, body string, header ...string) (reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{status: resp.StatusCode, header: resp.Header, body: string(b)},
			fmt.Errorf("%s %s: HTTP %d, read the body: %w", method, url, resp.StatusCode, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// problemType is the type of a problem+json answer.
func problemType(r reply) string {
	var p struct{ Type string }
	_ = json.Unmarshal([]byte(r.body), &p)
	return p.Type
}

func must(t testing.TB, what string, got reply, status int) {
	t.Helper()
	if got.status != status {
		t.Fatalf("%s: HTTP %d %s, want %d", what, got.status, got.body, status)
	}
}

func routes(t testing.TB, yaml string) *proxy.Routes {
	t.Helper()
	rs, err := proxy.ParseRoutes([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
