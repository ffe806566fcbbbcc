package rpc

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// testCluster is a single-node cluster serving the API over real gRPC on
// loopback, with a client connected to it.
type testCluster struct {
	node  *cluster.Node
	conn  *grpc.ClientConn
	api   idempb.IdempotencyClient
	admin idempb.AdminClient
}

// mustCluster starts a bootstrapped one-node cluster, waits until it leads
// and serves linearizable reads, and serves the API on 127.0.0.1:0.
func mustCluster(t *testing.T) *testCluster {
	t.Helper()
	return mustClusterOn(t, nil)
}

// mustClusterOn is mustCluster with the node and its API on clk (nil: the
// real clock).
func mustClusterOn(t *testing.T, clk clock.Clock) *testCluster {
	t.Helper()
	node := mustNodeOn(t, clk)
	_, conn := serveAPI(t, node, DefaultLimits())
	return &testCluster{node: node, conn: conn,
		api: idempb.NewIdempotencyClient(conn), admin: idempb.NewAdminClient(conn)}
}

// serveAPI serves the API with limits over node on 127.0.0.1:0 and returns
// the server and a plaintext client connection to it.
func serveAPI(t *testing.T, node *cluster.Node, limits Limits, opts ...grpc.ServerOption) (*Server, *grpc.ClientConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen grpc: %v", err)
	}
	s := NewServer(node, limits, nil)
	g := grpc.NewServer(opts...)
	s.Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, conn
}

// mustNode starts a bootstrapped one-node cluster and waits until it leads
// and serves linearizable reads.
func mustNode(t *testing.T) *cluster.Node {
	t.Helper()
	return mustNodeOn(t, nil)
}

// mustNodeOn is mustNode on clk (nil: the real clock); a server over the
// node ends its waits by the same clock (WithClock's default).
func mustNodeOn(t *testing.T, clk clock.Clock) *cluster.Node {
	t.Helper()
	node, err := cluster.Open(cluster.Config{
		NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true,
		Logger: slog.New(slog.DiscardHandler), Clock: clk,
	})
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	t.Cleanup(func() {
		if err := node.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := node.WaitForLeader(ctx); err != nil {
		t.Fatalf("wait for leader: %v", err)
	}
	// Leadership is known before the term's first entry is committed; the
	// barrier is what says the node serves linearizable reads.
	testutil.Eventually(t, 20*time.Second, "a linearizable barrier", func() bool {
		return node.LinearizableBarrier(ctx) == nil
	})
	return node
}

// testCtx returns a context bounded well above any single call of these tests.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func rid(key string) *idempb.RecordId {
	return &idempb.RecordId{Tenant: "acme", Scope: "POST /v1/charges", Key: key}
}

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// claim sends a claim and fails the test on a transport error.
func (c *testCluster) claim(t *testing.T, req *idempb.ClaimRequest) *idempb.ClaimResponse {
	t.Helper()
	resp, err := c.api.Claim(testCtx(t), req)
	if err != nil {
		t.Fatalf("claim %s: %v", req.GetId().GetKey(), err)
	}
	return resp
}

// mustWin claims key for owner with fingerprint fp and requires WON.
func (c *testCluster) mustWin(t *testing.T, key, owner string, fp []byte) *idempb.ClaimResponse {
	t.Helper()
	resp := c.claim(t, &idempb.ClaimRequest{Id: rid(key), Fingerprint: fp, Owner: owner})
	if resp.GetOutcome() != idempb.Outcome_OUTCOME_WON || resp.GetToken() == 0 {
		t.Fatalf("claim %s by %s = %v, want WON with a token", key, owner, resp)
	}
	return resp
}

func (c *testCluster) get(t *testing.T, key string, cons idempb.Consistency) *idempb.GetResponse {
	t.Helper()
	resp, err := c.api.Get(testCtx(t), &idempb.GetRequest{Id: rid(key), Consistency: cons})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return resp
}

// waitForWaiters returns once at least n keys of the node's state machine
// are watched, so a test changes a record only after its waiter is blocked.
// Take n from Machine().Waiting() before starting the waiter: a watch whose
// waiter timed out stays registered until its key changes.
func (c *testCluster) waitForWaiters(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "a registered waiter", func() bool {
		return c.node.Machine().Waiting() >= n
	})
}

// TestServices checks the standard services registered beside idem.v1.
func TestServices(t *testing.T) {
	t.Parallel()
	c := mustCluster(t)
	t.Run("health", func(t *testing.T) { checkHealth(t, c) })
	t.Run("reflection", func(t *testing.T) { checkReflection(t, c) })
}

func checkHealth(t *testing.T, c *testCluster) {
	for _, service := range []string{"", "idem.v1.Idempotency"} {
		resp, err := healthpb.NewHealthClient(c.conn).Check(testCtx(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health check %q: %v", service, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q = %v, want SERVING", service, resp.GetStatus())
		}
	}
}

func checkReflection(t *testing.T, c *testCluster) {
	stream, err := reflectionpb.NewServerReflectionClient(c.conn).ServerReflectionInfo(testCtx(t))
	if err != nil {
		t.Fatalf("open reflection stream: %v", err)
	}
	req := &reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"}}
	if err := stream.Send(req); err != nil {
		t.Fatalf("send list services: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("receive list services: %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"idem.v1.Idempotency", "idem.v1.Admin", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
}

// TestOutcomeNames guards the casts in convert.go: fsm's outcome and state
// enums must line up with idempb's value for value.
func TestOutcomeNames(t *testing.T) {
	// Every fsm outcome but QUOTA_EXCEEDED, which the API answers as an error.
	if got, want := len(idempb.Outcome_name), int(fsm.OutcomeExpired); got != want {
		t.Fatalf("idempb has %d outcomes, fsm has %d besides quota_exceeded", got, want)
	}
	for o := fsm.OutcomeUnknown; o <= fsm.OutcomeExpired; o++ {
		if o == fsm.OutcomeQuotaExceeded {
			continue
		}
		want := "OUTCOME_" + strings.ToUpper(o.String())
		if o == fsm.OutcomeUnknown {
			want = "OUTCOME_UNSPECIFIED"
		}
		if got := outcomeOf(o).String(); got != want {
			t.Errorf("outcomeOf(fsm %q) = %s, want %s", o, got, want)
		}
	}
	// And the states, with EXPIRED, which is how the API shows a tombstone.
	if got, want := len(idempb.State_name), int(fsm.StateCompleted)+2; got != want {
		t.Fatalf("idempb has %d states, fsm has %d and EXPIRED", got, want)
	}
	for _, s := range []fsm.State{fsm.StatePending, fsm.StateCompleted} {
		rec := recordOf(&fsm.Record{State: s})
		if got, want := rec.GetState().String(), "STATE_"+strings.ToUpper(s.String()); got != want {
			t.Errorf("recordOf(state %q).State = %s, want %s", s, got, want)
		}
	}
}

func (c *testCluster) status(t *testing.T) *idempb.StatusResponse {
	t.Helper()
	st, err := c.admin.Status(testCtx(t), &idempb.StatusRequest{})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}
