// Package testcluster runs an idemnode cluster inside a test process: real
// Raft, memberlist and gRPC servers started by server.Start, as serve starts
// them (the production interceptors, limits, metrics, auth and JSON API),
// each node on its own loopback address (<block>.<10+i>, a block of package
// testaddr) with every outgoing connection bound to it, so address-based
// partitions (package netfault) cut a node off for real.
package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testpki"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
	"github.com/idemnode/idemnode/server"
)

// Ports every node uses on its own IP.
const (
	GRPCPort   = 17400
	RaftPort   = 17401
	GossipPort = 17402
	JSONPort   = 17404
)

// Options shape a cluster.
type Options struct {
	// Addrs is the block the nodes' addresses come from (node i is
	// Addrs.IP(10+i)); New takes a free one when it is nil. A test gives its
	// own when it needs the addresses before the cluster exists.
	Addrs *testaddr.Block
	// Tune adjusts each node's configuration before it starts.
	Tune func(*cluster.Config)
	// Server adjusts each node's server configuration before it starts
	// (after the fields below are applied to it).
	Server func(*Node, *server.Config)
	// Limits replaces rpc.DefaultLimits() for every node's API.
	Limits *rpc.Limits
	// ServerOptions adds gRPC server options (interceptors, credentials)
	// to every node's server. With transport credentials, Node.Client and
	// Node.Admin cannot talk to the node: the test dials it itself.
	ServerOptions func(*Node) []grpc.ServerOption
	// Unary and Stream are interceptors of every node's gRPC server and,
	// with JSON, of its JSON API, as serve chains them.
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
	// JSON serves every node's HTTP/JSON API on JSONAddr (plaintext).
	JSON bool
	// APIOptions are added to every node's rpc.Server options.
	APIOptions []rpc.Option
	// Security, when set, runs every node with TLS on its gRPC port, mutual
	// TLS between nodes and encrypted gossip (see security.go).
	Security *Security
}

// Node is one in-process server.
type Node struct {
	Index   int
	ID      string
	IP      string
	DataDir string
	// Issuer and GossipKeys override the cluster's Security for this node
	// (set them before it starts): a certificate from another CA, another
	// keyring.
	Issuer     *testpki.CA
	GossipKeys [][]byte

	mu   sync.Mutex
	srv  *server.Server
	conn *grpc.ClientConn
}

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	opts  Options
	root  string
	Nodes []*Node
	// Addrs is the block of the nodes' addresses; hosts 1-10 and above
	// 10+len(Nodes) are free for the test's own listeners and processes,
	// and Addrs.Chain() names its partitions.
	Addrs *testaddr.Block
}

// New prepares n nodes without starting them (see StartNode).
func New(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.Addrs == nil {
		opts.Addrs = testaddr.New(t)
	}
	c := &Cluster{t: t, opts: opts, root: t.TempDir(), Addrs: opts.Addrs}
	for i := 1; i <= n; i++ {
		c.Nodes = append(c.Nodes, c.newNode(i))
	}
	t.Cleanup(c.Close)
	return c
}

// StartNode starts one prepared node with the given bootstrap-expect and
// gossip addresses to join.
func (c *Cluster) StartNode(nd *Node, expect int, join []string) {
	c.t.Helper()
	if err := c.start(nd, expect, join); err != nil {
		c.t.Fatal(err)
	}
}

// Start starts n nodes at once with --bootstrap-expect n, each joining the
// node before it (the first joins the last), and waits for a leader.
func Start(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	c := New(t, n, opts)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := c.Nodes[(i+n-1)%n]
			errs[i] = c.start(nd, n, []string{prev.GossipAddr()})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c.WaitLeader(30 * time.Second)
	return c
}

func (c *Cluster) newNode(i int) *Node {
	return &Node{Index: i, ID: fmt.Sprintf("node%d", i), IP: c.Addrs.IP(10 + i),
		DataDir: filepath.Join(c.root, fmt.Sprintf("node%d", i))}
}

// GRPCAddr, RaftAddr and GossipAddr are the node's fixed addresses.
func (nd *Node) GRPCAddr() string   { return net.JoinHostPort(nd.IP, fmt.Sprint(GRPCPort)) }
func (nd *Node) RaftAddr() string   { return net.JoinHostPort(nd.IP, fmt.Sprint(RaftPort)) }
func (nd *Node) GossipAddr() string { return net.JoinHostPort(nd.IP, fmt.Sprint(GossipPort)) }

// JSONURL is the base URL of the node's JSON API (Options.JSON).
func (nd *Node) JSONURL() string { return "http://" + net.JoinHostPort(nd.IP, fmt.Sprint(JSONPort)) }

func (c *Cluster) start(nd *Node, expect int, join []string) error {
	cfg := server.Config{
		NodeID: nd.ID, DataDir: nd.DataDir,
		GRPCAddr: nd.GRPCAddr(), GRPCAdvertise: nd.GRPCAddr(), RaftAddr: nd.RaftAddr(),
		GossipAddr: nd.GossipAddr(), GossipProfile: "local",
		Join: join, BootstrapExpect: expect,
		// Plaintext unless Options.Security says otherwise.
		TLS:        server.TLS{Insecure: true},
		APIOptions: c.opts.APIOptions,
		Unary:      c.opts.Unary, Stream: c.opts.Stream,
		Node: func(cfg *cluster.Config) {
			cfg.ReconcileInterval = 200 * time.Millisecond
			// Many test nodes run at once; each preallocates one segment.
			cfg.LogSegmentSize = 4 << 20
			if c.opts.Tune != nil {
				c.opts.Tune(cfg)
			}
		},
	}
	if c.opts.Limits != nil {
		cfg.Limits = *c.opts.Limits
	}
	if c.opts.ServerOptions != nil {
		cfg.GRPCOptions = c.opts.ServerOptions(nd)
	}
	if c.opts.JSON {
		cfg.APIAddr = net.JoinHostPort(nd.IP, fmt.Sprint(JSONPort))
	}
	creds := insecure.NewCredentials()
	if c.opts.Security != nil {
		var err error
		if creds, err = c.opts.Security.secure(c.t, nd, filepath.Join(c.root, nd.ID+"-tls"), &cfg); err != nil {
			return fmt.Errorf("%s: %w", nd.ID, err)
		}
	}
	if c.opts.Server != nil {
		c.opts.Server(nd, &cfg)
	}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", nd.ID, err)
	}
	conn, err := grpc.NewClient(nd.GRPCAddr(), grpc.WithTransportCredentials(creds))
	if err != nil {
		srv.HardStop()
		return fmt.Errorf("%s: dial: %w", nd.ID, err)
	}
	nd.mu.Lock()
	nd.srv, nd.conn = srv, conn
	nd.mu.Unlock()
	return nil
}

// Node returns the cluster node of a running server (nil when stopped).
func (nd *Node) Node() *cluster.Node {
	if srv := nd.Server(); srv != nil {
		return srv.Node()
	}
	return nil
}

// Server returns the running server (nil when stopped).
func (nd *Node) Server() *server.Server {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.srv
}

// Client returns an API client connected to this node.
func (nd *Node) Client() idempb.IdempotencyClient {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return idempb.NewIdempotencyClient(nd.conn)
}

// Admin returns an admin client connected to this node.
func (nd *Node) Admin() idempb.AdminClient {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return idempb.NewAdminClient(nd.conn)
}

// Running reports whether the node is started.
func (nd *Node) Running() bool { return nd.Node() != nil }

// Crash stops a node abruptly: no leadership transfer, no gossip leave.
// Acknowledged writes are on disk (the log syncs every append), so this is
// what kill -9 leaves behind as far as the data is concerned.
func (c *Cluster) Crash(nd *Node) {
	srv, conn := nd.stopped()
	if srv == nil {
		return
	}
	srv.HardStop()
	conn.Close()
}

// Leave stops a node the way SIGTERM does (server.Close): transfer
// leadership, leave gossip, let in-flight calls finish, then close.
func (c *Cluster) Leave(nd *Node) {
	srv, conn := nd.stopped()
	if srv == nil {
		return
	}
	if err := srv.Close(); err != nil {
		c.t.Logf("%s: close: %v", nd.ID, err)
	}
	conn.Close()
}

// stopped marks the node stopped and returns what ran it.
func (nd *Node) stopped() (*server.Server, *grpc.ClientConn) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	srv, conn := nd.srv, nd.conn
	nd.srv, nd.conn = nil, nil
	return srv, conn
}

// Restart starts a stopped node again on its data dir, joining the others.
func (c *Cluster) Restart(nd *Node) {
	c.t.Helper()
	if err := c.start(nd, len(c.Nodes), c.gossipAddrs(nd)); err != nil {
		c.t.Fatal(err)
	}
}

// AddNode starts a new node that joins the running cluster.
func (c *Cluster) AddNode() *Node {
	c.t.Helper()
	nd := c.NewNode()
	c.Join(nd)
	return nd
}

// NewNode prepares one more node without starting it, so a test can set
// its Issuer or GossipKeys first; Join starts it.
func (c *Cluster) NewNode() *Node {
	nd := c.newNode(len(c.Nodes) + 1)
	c.Nodes = append(c.Nodes, nd)
	return nd
}

// Join starts a prepared node that joins the running cluster.
func (c *Cluster) Join(nd *Node) {
	c.t.Helper()
	if err := c.start(nd, 0, c.gossipAddrs(nd)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) gossipAddrs(except *Node) []string {
	var out []string
	for _, o := range c.Nodes {
		if o != except {
			out = append(out, o.GossipAddr())
		}
	}
	return out
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, nd := range c.Nodes {
		c.Crash(nd)
	}
}

// Running returns the started nodes.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, nd := range c.Nodes {
		if nd.Running() {
			out = append(out, nd)
		}
	}
	return out
}

// WaitLeader waits until a running node is leader and has committed its
// term's first entry (a linearizable read succeeds on it), and returns it.
func (c *Cluster) WaitLeader(timeout time.Duration) *Node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, nd := range c.Running() {
			node := nd.Node()
			if node == nil || node.Status().State != "leader" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := node.LinearizableBarrier(ctx)
			cancel()
			if err == nil {
				return nd
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %s", timeout)
	return nil
}

// WaitConverged waits until every running node has applied the same index
// and holds the same digest, and returns that digest.
func (c *Cluster) WaitConverged(timeout time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		digests := map[string]bool{}
		var views []string
		for _, nd := range c.Running() {
			st := nd.Node().Status()
			digests[fmt.Sprintf("%d/%s", st.AppliedIndex, st.Digest)] = true
			views = append(views, fmt.Sprintf("%s applied=%d commit=%d digest=%.12s", st.NodeID, st.AppliedIndex, st.CommitIndex, st.Digest))
		}
		if len(digests) == 1 {
			for d := range digests {
				_, digest, _ := strings.Cut(d, "/")
				return digest
			}
		}
		sort.Strings(views)
		last = strings.Join(views, "; ")
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("nodes did not converge within %s: %s", timeout, last)
	return ""
}

// Tokens writes a tokens file giving each token (a key of tenants) its
// tenant, and loads it, for nodes that authenticate by bearer tokens.
func Tokens(t testing.TB, tenants map[string]string) *rpc.TokenTable {
	t.Helper()
	var lines strings.Builder
	for token, tenant := range tenants {
		fmt.Fprintf(&lines, "%s %s\n", rpc.HashToken(token), tenant)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		t.Fatalf("write tokens: %v", err)
	}
	tokens, err := rpc.LoadTokenTable(path, rpc.DefaultLimits().MaxTenant)
	if err != nil {
		t.Fatalf("load tokens: %v", err)
	}
	return tokens
}
