// Package rpc maps the idem.v1 gRPC API onto the cluster: it validates
// requests against the limits, turns them into state-machine commands, and
// maps results and errors back to the wire.
package rpc

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

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
	// Status describes the node.
	Status() cluster.Status
}

// Server implements idem.v1.Idempotency and idem.v1.Admin.
type Server struct {
	idempb.UnimplementedIdempotencyServer
	idempb.UnimplementedAdminServer

	backend Backend
	limits  Limits
	log     *slog.Logger
	health  *health.Server
}

// NewServer returns a server over backend.
func NewServer(backend Backend, limits Limits, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{backend: backend, limits: limits, log: log, health: health.NewServer()}
}

// Register adds the idem.v1 services, the standard health service and server
// reflection to g.
func (s *Server) Register(g *grpc.Server) {
	idempb.RegisterIdempotencyServer(g, s)
	idempb.RegisterAdminServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(idempb.Idempotency_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// Shutdown marks the services NOT_SERVING so health checks drain traffic.
func (s *Server) Shutdown() { s.health.Shutdown() }

// apply commits c and maps any error to a gRPC status.
func (s *Server) apply(ctx context.Context, c *fsm.Command) (fsm.Result, error) {
	res, err := s.backend.Apply(ctx, c)
	return res, toStatus(err, s.log)
}
