// Package rpc maps the idem.v1 gRPC API onto the cluster: it validates
// requests against the limits, turns them into state-machine commands, and
// maps results and errors back to the wire.
package rpc

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Backend is what the API needs from the cluster; *cluster.Node implements it.
type Backend interface {
	// Apply commits a command and returns its result.
	Apply(ctx context.Context, c *fsm.Command) (fsm.Result, error)
	// LinearizableBarrier returns once the local state reflects every write
	// committed before the call.
	LinearizableBarrier(ctx context.Context) error
	// Machine is the local state machine.
	Machine() *fsm.Machine
	// Status describes the node (it computes a digest: not for hot paths).
	Status() cluster.Status
	// ID is this node's id.
	ID() string
	// Leader returns the leader's id and gRPC address, empty when unknown.
	Leader() (id, grpcAddr string)
	// LeaderChanged returns a channel closed at the next change of this
	// node's own leadership; waits end on it (see wait.go).
	LeaderChanged() <-chan struct{}
	// Members, RemoveMember and TransferLeadership serve the admin API.
	Members() (cluster.Membership, error)
	RemoveMember(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
	// Backup writes a consistent backup (on the leader only).
	Backup(ctx context.Context, w io.Writer) (cluster.BackupInfo, error)
}

// Server implements idem.v1.Idempotency and idem.v1.Admin.
type Server struct {
	idempb.UnimplementedIdempotencyServer
	idempb.UnimplementedAdminServer

	backend Backend
	limits  Limits
	log     *slog.Logger
	health  *health.Server
	fwd     forwarder
	// waits counts the calls held waiting, for the wait caps of Limits.
	waits   waitCounter
	metrics *Metrics // nil: no metrics
	// tenantClaims counts claims by tenant for the metrics (with metrics only).
	tenantClaims *tenantClaims
	// clock ends held waits, by their timeout or by the end of a holder's
	// lease (wait.go), and the timeout a forwarded call carries.
	clock clock.Clock
	// closing is closed by Shutdown; forwarding streams and waits end on it.
	closing   chan struct{}
	closeOnce sync.Once
	// bug names a planted bug (fault injection for jepsen's self-test);
	// it is empty in the release build (bugs_nofaults.go).
	bug plantedBug
}

// Option configures a Server.
type Option func(*Server)

// WithClock makes the server's waits end by c: a call's wait or timeout,
// and a holder's lease, which the leader's clock stamped. Without it the
// server uses the backend's clock when it has one (cluster.Node.Clock), so
// the two agree, and the real clock otherwise. Tests pass a fake clock they
// advance (internal/testclock).
func WithClock(c clock.Clock) Option {
	return func(s *Server) { s.clock = c }
}

// WithForwardSource makes connections to the leader leave from ip, the
// node's own address, so partitions by address cut forwarding too.
func WithForwardSource(ip net.IP) Option {
	return func(s *Server) { s.fwd.dialer = cluster.BoundDialer(&net.TCPAddr{IP: ip}) }
}

// WithPeerCredentials secures the connections this node opens to other
// nodes (forwarding) with creds, e.g. mutual TLS with the cluster CA.
func WithPeerCredentials(creds credentials.TransportCredentials) Option {
	return func(s *Server) { s.fwd.creds = creds }
}

// WithForwardDialOptions adds opts to the connections this node opens to
// the leader's advertised gRPC address: a resolver for names that the
// system's DNS does not know (tests use one), interceptors, stats handlers.
func WithForwardDialOptions(opts ...grpc.DialOption) Option {
	return func(s *Server) { s.fwd.dialOpts = append(s.fwd.dialOpts, opts...) }
}

// WithUnaryForwarding forwards each call to the leader as its own unary
// RPC with the caller's bearer token, which the leader checks again. Use it
// when authentication is on but nodes have no peer TLS to prove to each
// other who they are: the forwarding stream is open to peers only.
func WithUnaryForwarding() Option {
	return func(s *Server) { s.fwd.unaryOnly = true }
}

// NewServer returns a server over backend.
func NewServer(backend Backend, limits Limits, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.Default()
	}
	// Commands go through quotaBackend, which answers the state machine's
	// QUOTA_EXCEEDED as an error (quota.go).
	s := &Server{backend: quotaBackend{Backend: backend, retryAfter: limits.QuotaRetryAfter},
		limits: limits, log: log, health: health.NewServer(), closing: make(chan struct{})}
	if b, ok := backend.(interface{ Clock() clock.Clock }); ok {
		s.clock = b.Clock()
	}
	for _, o := range opts {
		o(s)
	}
	if s.clock == nil {
		s.clock = clock.Real()
	}
	return s
}

// ServerOptions are the gRPC server options every idemnode server uses.
// Peers ping forwarding connections every second to notice a dead leader,
// so the server must allow pings that often. Calls run on a pool of
// long-lived goroutines instead of a new one each: a call's stack grows past
// a new goroutine's on the way through validation, forwarding and the commit
// queue, and that growth alone was 2–5 % of a node's CPU under the claim
// benchmark (docs/PERFORMANCE.md). A call that finds every worker busy — a
// worker is held for the whole commit round, or a wait — gets a goroutine of
// its own, as without the pool. A request whose strings are not valid UTF-8
// is refused as InvalidArgument naming the field (codec.go); the options
// put that check first in the interceptor chain.
func ServerOptions() []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 500 * time.Millisecond, PermitWithoutStream: true}),
		grpc.NumStreamWorkers(callWorkers),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
	}, textServerOptions()...)
}

// streamWindow and connWindow are the HTTP/2 flow-control windows the
// server grants each call and each connection. Fixed windows turn off
// gRPC's bandwidth estimator, which answers a connection's data with a ping
// every round trip to size them: at a claim's few hundred bytes the windows
// never fill, and the pings were a write and a read each (docs/PERFORMANCE.md).
// They bound what a client may have the server hold unread: a connection
// 2 MiB, about two of the largest messages (Limits.MaxMessageBytes), where
// the estimator would let one grow to 16 MiB. Between zones (2 ms) they
// still carry 500 MiB/s on one connection.
const (
	streamWindow = 1 << 20
	connWindow   = 2 << 20
)

// callWorkers is about the calls a busy node has in flight at once.
const callWorkers = 256

// ConnectionOptions bound what one client connection may hold of the
// server: at most maxStreams calls in flight on it (a client's further
// calls queue on its side until one ends; 0 leaves gRPC's default, no cap),
// and handshake for the TLS handshake and the HTTP/2 preface, after which a
// connection that has not finished them is closed (gRPC's default is 120 s,
// long enough for a few thousand silent connections to hold every
// descriptor a listener may take; 0 keeps it).
func ConnectionOptions(maxStreams uint32, handshake time.Duration) []grpc.ServerOption {
	var opts []grpc.ServerOption
	if maxStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(maxStreams))
	}
	if handshake > 0 {
		opts = append(opts, grpc.ConnectionTimeout(handshake))
	}
	return opts
}

// Register adds the idem.v1 services, the standard health service and server
// reflection to g.
func (s *Server) Register(g *grpc.Server) {
	idempb.RegisterIdempotencyServer(g, s)
	idempb.RegisterAdminServer(g, s)
	idempb.RegisterForwardServer(g, forwardService{s: s})
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(idempb.Idempotency_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// SetServing sets what the gRPC health service answers for the server and
// the Idempotency service; serve keeps it in step with readiness.
func (s *Server) SetServing(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(idempb.Idempotency_ServiceDesc.ServiceName, st)
}

// Shutdown marks the services NOT_SERVING so health checks drain traffic,
// and closes the connections to the leader.
func (s *Server) Shutdown() {
	s.health.Shutdown()
	s.closeOnce.Do(func() { close(s.closing) })
	s.fwd.close()
}
