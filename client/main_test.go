package client_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testmain"
	"github.com/idemnode/idemnode/internal/testutil"
)

// shared is a three-node cluster for the tests that do not kill nodes, and
// for the runnable examples, which call nodeAddrs, its gRPC addresses.
var (
	shared    *testcluster.Cluster
	nodeAddrs []string
)

func TestMain(m *testing.M) {
	tb := testmain.New("client")
	shared = testcluster.Start(tb, 3, testcluster.Options{})
	nodeAddrs = addrs(shared)
	code := m.Run()
	tb.Close()
	os.Exit(code)
}

// addrs returns the gRPC addresses of every node of c.
func addrs(c *testcluster.Cluster) []string {
	var out []string
	for _, nd := range c.Nodes {
		out = append(out, nd.GRPCAddr())
	}
	return out
}

// newClient returns a client of c, closed at the end of the test.
func newClient(t testing.TB, c *testcluster.Cluster, tune ...func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{Addrs: addrs(c)}
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

// testCtx is bounded well above any single call of these tests.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newID returns a fresh record id in tenant acme.
func newID() client.ID {
	return client.ID{Tenant: "acme", Scope: "POST /v1/charges", Key: client.NewKey()}
}

// heldOnLeader returns once n more keys are watched on the leader than
// before start ran, so a test changes a record only after its waiters are
// held. Tests that use it do not run in parallel with others, whose
// waiters would count too.
func heldOnLeader(t testing.TB, c *testcluster.Cluster, n int, start func()) {
	t.Helper()
	m := c.WaitLeader(30 * time.Second).Node().Machine()
	base := m.Waiting()
	start()
	testutil.Eventually(t, 10*time.Second, "waiters held on the leader", func() bool { return m.Waiting() >= base+n })
}
