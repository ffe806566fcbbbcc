package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testpki"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/server"
)

type reply struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, base, tenant, key, body string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/charges", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set("Authorization", "Bearer "+tenant)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// startAPI runs the command (run) with args and a free --listen until the
// test ends, and returns its base URL once it listens.
func startAPI(t *testing.T, args ...string) string {
	t.Helper()
	listen := testutil.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, append(args, "--listen", listen), io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	testutil.Eventually(t, 10*time.Second, "the API listening", func() bool {
		conn, err := net.Dial("tcp", listen)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return "http://" + listen
}

func executions(t *testing.T, base string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/stats", nil)
	var st struct{ Executions int }
	if err := json.Unmarshal([]byte(send(t, req).body), &st); err != nil {
		t.Fatal(err)
	}
	return st.Executions
}

// TestPayments runs the example as docs/SDK.md's command does (run with
// --cluster and --listen) against a three-node cluster, and checks every
// answer of POST /v1/charges and the executions count.
func TestPayments(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	var addrs []string
	for _, nd := range c.Nodes {
		addrs = append(addrs, nd.GRPCAddr())
	}
	base := startAPI(t, "--cluster", strings.Join(addrs, ","), "--wait", "30s")

	key := client.NewKey()
	first := post(t, base, "acme", key, `{"amount":1000,"currency":"EUR"}`)
	var ch struct {
		ID       string
		Amount   int
		Currency string
	}
	if err := json.Unmarshal([]byte(first.body), &ch); err != nil || first.status != 201 ||
		!strings.HasPrefix(ch.ID, "ch_") || ch.Amount != 1000 || ch.Currency != "EUR" {
		t.Fatalf("charge = %d %s, want 201 with a ch_ id, the amount and currency", first.status, first.body)
	}
	retry := post(t, base, "acme", key, `{"currency":"EUR","amount":1000}`)
	if retry.status != 201 || retry.body != first.body || retry.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry = %d %s, want the same charge replayed", retry.status, retry.body)
	}
	if n := executions(t, base); n != 1 {
		t.Errorf("executions after a charge and its retry = %d, want 1", n)
	}

	declined := client.NewKey()
	d1 := post(t, base, "acme", declined, `{"amount":402,"currency":"EUR"}`)
	d2 := post(t, base, "acme", declined, `{"amount":402,"currency":"EUR"}`)
	if d1.status != 402 || d1.header.Get("Content-Type") != "application/problem+json" || d2.body != d1.body || d2.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("declined charge and retry = %d %s / %d %s, want 402 problem stored and replayed", d1.status, d1.body, d2.status, d2.body)
	}
	if n := executions(t, base); n != 2 {
		t.Errorf("executions after a declined charge and its retry = %d, want 2", n)
	}

	transient := client.NewKey()
	for i := range 2 {
		if r := post(t, base, "acme", transient, `{"amount":503,"currency":"EUR"}`); r.status != 503 || r.header.Get("Idempotent-Replayed") != "" {
			t.Errorf("transient failure %d = %d %s, want 503 run again", i, r.status, r.body)
		}
	}
	if n := executions(t, base); n != 4 {
		t.Errorf("executions after two transient failures = %d, want 4", n)
	}

	if r := post(t, base, "", client.NewKey(), `{"amount":1,"currency":"EUR"}`); r.status != 401 {
		t.Errorf("charge without Authorization = %d, want 401", r.status)
	}
	if r := post(t, base, "acme", "", `{"amount":1,"currency":"EUR"}`); r.status != 400 {
		t.Errorf("charge without a key = %d, want 400", r.status)
	}
	if r := post(t, base, "acme", key, `{"amount":2000,"currency":"EUR"}`); r.status != 422 {
		t.Errorf("key reused for another charge = %d, want 422", r.status)
	}
	if r := post(t, base, "globex", key, `{"amount":2000,"currency":"EUR"}`); r.status != 201 {
		t.Errorf("the same key for another tenant = %d, want 201", r.status)
	}

	// Twenty concurrent retries of one charge: one execution, one id.
	before, burst := executions(t, base), client.NewKey()
	bodies := make([]string, 20)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := post(t, base, "acme", burst, `{"amount":42,"currency":"USD"}`)
			bodies[i] = fmt.Sprint(r.status, " ", r.body)
		}()
	}
	wg.Wait()
	for i, b := range bodies {
		if b != bodies[0] || !strings.HasPrefix(b, "201 ") {
			t.Errorf("concurrent retry %d = %s, want %s", i, b, bodies[0])
		}
	}
	if n := executions(t, base); n != before+1 {
		t.Errorf("executions after 20 concurrent retries = %d, want %d", n, before+1)
	}
}

// TestExitCodes runs the command itself (this test binary, re-executed as
// main) with --help, -h and a bad flag, and checks the exit codes.
func TestExitCodes(t *testing.T) {
	if os.Getenv("PAYMENTS_AS_MAIN") == "1" {
		os.Args = append([]string{"payments"}, strings.Fields(os.Getenv("PAYMENTS_ARGS"))...)
		main()
		os.Exit(0) // main returned: the command's exit 0
	}
	t.Parallel()
	for _, tc := range []struct {
		args string
		code int
		want string
	}{
		{"--help", 0, "127.0.0.1:17400,127.0.0.1:17410,127.0.0.1:17420"},
		{"-h", 0, "-cluster string"},
		{"--no-such-flag", 2, "flag provided but not defined: -no-such-flag"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestExitCodes$")
		cmd.Env = append(os.Environ(), "PAYMENTS_AS_MAIN=1", "PAYMENTS_ARGS="+tc.args)
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("payments %s: exit %d, want %d, with %q in:\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
}

// TestComposeDocumented holds docs/DEPLOY.md's compose section, and this
// command's usage, to docker-compose.yml: every port it publishes is named
// (gRPC and HTTP), and the commands use the `docker compose` spelling of
// the file's own header.
func TestComposeDocumented(t *testing.T) {
	t.Parallel()
	compose, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := os.ReadFile("../../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(deploy)
	start := strings.Index(section, "`docker-compose.yml` runs")
	end := strings.Index(section, "## Kubernetes")
	if start < 0 || end < start {
		t.Fatal("docs/DEPLOY.md has no compose section before ## Kubernetes")
	}
	section = section[start:end]
	// "127.0.0.1:${IDEMNODE_NODE1_GRPC_PORT-17400}:7400"
	published := regexp.MustCompile(`"127\.0\.0\.1:\$\{IDEMNODE_NODE\d_(GRPC|HTTP)_PORT-(\d+)\}:\d+"`).FindAllStringSubmatch(string(compose), -1)
	if len(published) != 6 {
		t.Fatalf("docker-compose.yml publishes %d ports, want gRPC and HTTP of 3 nodes: %q", len(published), published)
	}
	var grpcAddrs []string
	for _, p := range published {
		addr := "127.0.0.1:" + p[2]
		if !strings.Contains(section, addr) {
			t.Errorf("docs/DEPLOY.md's compose section does not name the %s port %s", p[1], addr)
		}
		if p[1] == "GRPC" {
			grpcAddrs = append(grpcAddrs, addr)
		}
	}
	if !strings.Contains(usageText, strings.Join(grpcAddrs, ",")) {
		t.Errorf("the usage does not name the compose cluster %s", strings.Join(grpcAddrs, ","))
	}
	if !strings.Contains(string(compose), "docker compose -p idemnode up") {
		t.Fatal("docker-compose.yml's header no longer says `docker compose -p idemnode up`")
	}
	for _, cmd := range []string{"docker compose -p idemnode up -d", "docker compose -p idemnode down -v"} {
		if !strings.Contains(section, cmd) {
			t.Errorf("docs/DEPLOY.md's compose section lacks %q", cmd)
		}
	}
	if regexp.MustCompile(`(?m)^[^#\n]*docker-compose -p`).MatchString(section) {
		t.Errorf("docs/DEPLOY.md's compose section runs docker-compose, not the header's docker compose:\n%s", section)
	}
}

// TestPaymentsOverMutualTLS: with -tls-ca, -tls-cert and -tls-key the
// example reaches a cluster with mutual TLS and --auth as a delegate, so each
// request names its own tenant; without them (plaintext) it cannot charge.
func TestPaymentsOverMutualTLS(t *testing.T) {
	sec := testcluster.NewSecurity(t)
	c := testcluster.Start(t, 3, testcluster.Options{Security: sec, Server: func(_ *testcluster.Node, cfg *server.Config) {
		cfg.Auth = server.Auth{Enabled: true, CertTenant: "cn", Delegates: []string{"gateway"}}
	}})
	dir := t.TempDir()
	ca := testpki.WriteFile(t, dir, "cluster-ca.crt", sec.CA.PEM)
	cert, key := sec.ClientCA.IssueClient(t, "gateway").Write(t, dir, "gateway")
	charge := func(t *testing.T, flags ...string) reply {
		base := startAPI(t, append([]string{"--cluster", c.Nodes[0].GRPCAddr()}, flags...)...)
		return post(t, base, "acme", client.NewKey(), `{"amount":1000,"currency":"EUR"}`)
	}
	if r := charge(t, "-tls-ca", ca, "-tls-cert", cert, "-tls-key", key); r.status != 201 {
		t.Errorf("charge over mutual TLS = %d %s, want 201", r.status, r.body)
	}
	// A plaintext client is answered by nothing: it retries until its
	// timeout (plus the claim's wait), then the API fails the request.
	if r := charge(t, "-timeout", "1s", "-wait", "1s"); r.status < 500 {
		t.Errorf("charge in plaintext = %d %s, want a server error", r.status, r.body)
	}
}
