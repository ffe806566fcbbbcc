package idemhttp_test

import (
	"context"
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testmain"
	"github.com/idemnode/idemnode/internal/testutil"
)

// shared is a three-node cluster for every test here and for the runnable
// example, which calls nodeAddrs, its gRPC addresses.
var (
	shared    *testcluster.Cluster
	nodeAddrs []string
)

func TestMain(m *testing.M) {
	tb := testmain.New("idemhttp")
	// Fuzzing runs only the pure fuzz targets, in worker processes that
	// each run TestMain: they need no cluster.
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		shared = testcluster.Start(tb, 3, testcluster.Options{})
		for _, nd := range shared.Nodes {
			nodeAddrs = append(nodeAddrs, nd.GRPCAddr())
		}
	}
	code := m.Run()
	tb.Close()
	os.Exit(code)
}

func newClient(t testing.TB, tune ...func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{Addrs: nodeAddrs}
	for _, f := range tune {
		f(&cfg)
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// serve starts an HTTP server with next behind the middleware.
func serve(t testing.TB, cfg idemhttp.Config, next http.Handler, opts ...idemhttp.RouteOption) *httptest.Server {
	t.Helper()
	if cfg.Client == nil {
		cfg.Client = newClient(t)
	}
	if cfg.Tenant == nil {
		cfg.Tenant = idemhttp.BearerTenant
	}
	m, err := idemhttp.New(cfg)
	if err != nil {
		t.Fatalf("new middleware: %v", err)
	}
	srv := httptest.NewUnstartedServer(m.Handler(next, opts...))
	// Handler panics are part of the tests; net/http logs each with a stack.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// reply is a response with its body read.
type reply struct {
	status int
	header http.Header
	body   string
}

// request sends method to url with the key (none when ""), tenant acme and
// body; extra header pairs are added (an Authorization replaces acme's).
func request(t testing.TB, method, url, key, body string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer acme")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if http.CanonicalHeaderKey(header[i]) == "Authorization" {
			req.Header.Del("Authorization")
		}
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// heldOnLeader returns once n more keys are watched on the leader than
// before start ran: the duplicates it sent are held by the server.
func heldOnLeader(t testing.TB, n int, start func()) {
	t.Helper()
	m := shared.WaitLeader(30 * time.Second).Node().Machine()
	base := m.Waiting()
	start()
	testutil.Eventually(t, 10*time.Second, "waiters held on the leader", func() bool { return m.Waiting() >= base+n })
}
