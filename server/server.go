// Package server runs one idemnode server: the cluster node, the gRPC API
// with its interceptors and limits, the HTTP/JSON API, the operator
// endpoints and metrics, TLS, authentication and the reload of their files.
// `idemnode serve` turns its flags into a Config and calls Start; tests
// start their nodes the same way, so they run the production wiring
// (etcd's server/embed is the model). The package never ends the process:
// a fault the node cannot run past goes to Config.OnFatal or Err.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/httpserve"
	"github.com/idemnode/idemnode/internal/netlimit"
	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/jsonapi"
)

// Server is a running idemnode server.
type Server struct {
	cfg  Config
	log  *slog.Logger
	node *cluster.Node
	api  *rpc.Server
	grpc *grpc.Server
	reg  *prometheus.Registry

	grpcLn, httpLn, apiLn net.Listener
	httpSrv, apiSrv       *http.Server

	reloads *reloader
	// errc receives what ends the server early: a listener's failure, the
	// node's fatal fault (Err).
	errc chan error
	// stop ends the background work (readiness, reloads, fault relay).
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
	// hup asks the reload loop to re-read every file (Reload).
	hup chan struct{}
}

// shutdownGrace is how long Close lets calls in flight finish.
const shutdownGrace = 5 * time.Second

// Start checks cfg, opens the node and serves its ports. ctx bounds the
// start only: the server runs until Close. A *ConfigError is the caller's
// input; any other error is a failure at run time.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, configError(err)
	}
	log := cfg.Logger
	sec, err := loadSecurity(cfg.TLS, cfg.GossipAddr != "", log)
	if err != nil {
		return nil, configError(err)
	}
	s := &Server{cfg: cfg, log: log, reg: prometheus.NewRegistry(), errc: make(chan error, 4), hup: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			s.HardStop()
		}
	}()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if sec.node != nil {
		s.reg.MustRegister(tlsconfig.NewExpiryCollector(sec.node))
	}
	if cfg.RaftMetrics {
		if err := cluster.ExportRaftMetrics(s.reg); err != nil {
			return nil, err
		}
	}
	caps, err := cfg.fitConns(netlimit.NewMetrics(s.reg), log)
	if err != nil {
		return nil, err
	}
	bugs, err := cfg.Faults.rpcOptions(log)
	if err != nil {
		return nil, configError(err)
	}
	unary, stream, tokens, err := cfg.Auth.interceptors(cfg.Limits.MaxTenant, log)
	if err != nil {
		return nil, configError(err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	applyMemoryLimit(cfg.MemoryLimit, log)
	if s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("listen grpc: %w", err)
	}
	if s.node, err = cluster.Open(s.nodeConfig(sec)); err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	if err := s.serve(sec, caps, bugs, unary, stream); err != nil {
		return nil, err
	}
	s.reloads = s.newReloader(sec, tokens)
	s.background()
	log.Info("idemnode serving", "node", cfg.NodeID, "grpc", s.GRPCAddr(), "raft", s.RaftAddr(),
		"http", s.HTTPAddr(), "api", s.APIAddr(), "data", cfg.DataDir, "tls", sec.node != nil)
	return s, nil
}

// nodeConfig is the cluster node's configuration.
func (s *Server) nodeConfig(sec *security) cluster.Config {
	c := s.cfg
	nc := cluster.Config{
		NodeID:             c.NodeID,
		DataDir:            c.DataDir,
		RaftAddr:           c.RaftAddr,
		RaftAdvertise:      c.RaftAdvertise,
		GRPCAdvertise:      orDefault(c.GRPCAdvertise, s.grpcLn.Addr().String()),
		Bootstrap:          c.BootstrapExpect <= 1 && len(c.Join) == 0,
		GossipAddr:         c.GossipAddr,
		GossipAdvertise:    c.GossipAdvertise,
		GossipProfile:      c.GossipProfile,
		GossipKeys:         sec.gossipKeys,
		PeerTLS:            sec.peerTLS(),
		Join:               c.Join,
		BootstrapExpect:    c.BootstrapExpect,
		DeadServerCleanup:  c.DeadServerCleanup,
		SnapshotThreshold:  c.SnapshotThreshold,
		SnapshotInterval:   c.SnapshotInterval,
		ExpiryInterval:     c.ExpiryInterval,
		DiskStallTimeout:   c.DiskStallTimeout,
		StoreCacheSize:     c.CacheSize,
		StoreMemTableSize:  uint64(c.MemTableSize),
		StoreKeyFilterSize: c.KeyFilterSize,
		StoreScrubPeriod:   c.ScrubPeriod,
		Logger:             s.log,
		Metrics:            s.reg,
		OnFatal:            c.OnFatal,
	}
	c.Faults.apply(&nc)
	if c.Node != nil {
		c.Node(&nc)
	}
	return nc
}

// serve starts the gRPC server, the JSON API and the operator endpoints.
// The interceptors run in this order on both APIs: metrics, then
// authentication (it names the tenant), then the rate limit, then the
// caller's own.
func (s *Server) serve(sec *security, caps listenerCaps, bugs []rpc.Option, unary []grpc.UnaryServerInterceptor,
	stream []grpc.StreamServerInterceptor) error {
	c := s.cfg
	apiMetrics := rpc.NewMetrics(s.reg)
	opts := []rpc.Option{rpc.WithForwardSource(s.grpcLn.Addr().(*net.TCPAddr).IP), rpc.WithMetrics(apiMetrics, s.reg)}
	opts = append(append(append(opts, sec.rpcOptions(c.Auth.Enabled)...), bugs...), c.APIOptions...)
	s.api = rpc.NewServer(s.node, c.Limits, s.log, opts...)
	unary = append(append([]grpc.UnaryServerInterceptor{apiMetrics.UnaryInterceptor()}, unary...), c.Unary...)
	stream = append(stream, c.Stream...)
	serverOpts := append(append(rpc.ServerOptions(), sec.serverOptions()...), c.Limits.ServerOptions()...)
	serverOpts = append(append(serverOpts, rpc.ConnectionOptions(c.GRPCMaxStreams, c.HandshakeTimeout)...), c.GRPCOptions...)
	s.grpc = grpc.NewServer(append(serverOpts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))...)
	s.api.Register(s.grpc)
	jsonAPI, err := jsonapi.New(jsonapi.Config{Idempotency: s.api, Admin: s.api, Unary: unary, Stream: stream,
		MaxMessageBytes: c.Limits.MaxMessageBytes})
	if err != nil {
		return err
	}
	caps.grpc.Exempt = rpc.PeerAddrs(s.node)
	grpcLn := netlimit.Limit(s.grpcLn, caps.grpc)
	go func() {
		if err := s.grpc.Serve(grpcLn); err != nil {
			s.errc <- fmt.Errorf("grpc: %w", err)
		}
	}()
	if s.httpSrv, s.httpLn, err = httpserve.Serve(c.HTTPAddr, opsHandler(s.node, s.reg, c.Pprof), nil, caps.http, c.Conns.ReadTimeout, s.errc); err != nil {
		return err
	}
	if s.apiSrv, s.apiLn, err = httpserve.Serve(c.APIAddr, jsonAPI, sec.jsonTLS(), caps.api, c.Conns.ReadTimeout, s.errc); err != nil {
		return err
	}
	return nil
}

// newReloader watches the files the server reads at run time.
func (s *Server) newReloader(sec *security, tokens *rpc.TokenTable) *reloader {
	r := &reloader{certs: sec.node, log: s.log}
	if f := sec.files.GossipKeyFile; f != "" {
		r.files = append(r.files, newWatchedFile("gossip keys", "keys", f, sec.gossipFile, func(b []byte) (int, error) {
			keys, err := cluster.ParseGossipKeys(string(b))
			if err == nil {
				err = s.node.SetGossipKeys(keys)
			}
			return len(keys), err
		}, s.log))
	}
	if tokens != nil {
		r.files = append(r.files, watchTokens(tokens, s.cfg.Auth.TokensFile, s.log))
	}
	return r
}

// background starts the server's own loops: readiness, reloads, and the
// relay of the node's fatal fault to Err.
func (s *Server) background() {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.wg.Add(3)
	go func() { defer s.wg.Done(); followReadiness(ctx, s.node, s.api) }()
	go func() {
		defer s.wg.Done()
		var tick <-chan time.Time
		if s.reloads.watching() {
			t := time.NewTicker(reloadPoll)
			defer t.Stop()
			tick = t.C
		}
		s.reloads.run(ctx, tick, s.hup)
	}()
	go func() {
		defer s.wg.Done()
		select {
		case err := <-s.node.Fatal():
			s.errc <- err
		case <-ctx.Done():
		}
	}()
}

// Reload has the certificates, the gossip key file and the tokens file
// re-read at once, whether or not they changed (serve calls it on SIGHUP).
// It does not wait: the reload loop reads them, one reload at a time, and
// a file that cannot be used keeps what is in use, and is logged.
func (s *Server) Reload() {
	select {
	case s.hup <- struct{}{}:
	default: // a reload is pending already
	}
}

// Err receives what ends the server early: a listener that failed, or a
// fault the node cannot run past (cluster.Node.Fatal: a data dir of another
// cluster joined to this one, cluster.ErrOtherCluster; a storage fault,
// cluster.ErrStorageFault, when Config.OnFatal is nil). The server stays
// open; the caller closes it.
func (s *Server) Err() <-chan error { return s.errc }

// Ready reports whether the node serves: it knows a leader and has applied
// what it knows to be committed (/readyz, the gRPC health service).
func (s *Server) Ready() error { return s.node.Ready() }

// Node is the server's cluster node.
func (s *Server) Node() *cluster.Node { return s.node }

// API is the server's gRPC API.
func (s *Server) API() *rpc.Server { return s.api }

// Registry holds the server's metrics (/metrics).
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// GRPCAddr, RaftAddr, GossipAddr, HTTPAddr and APIAddr are the addresses
// the server bound ("" for a port that is off; GossipAddr as configured).
func (s *Server) GRPCAddr() string   { return s.grpcLn.Addr().String() }
func (s *Server) RaftAddr() string   { return s.node.RaftAddr() }
func (s *Server) GossipAddr() string { return s.cfg.GossipAddr }
func (s *Server) HTTPAddr() string   { return addrOf(s.httpLn) }
func (s *Server) APIAddr() string    { return addrOf(s.apiLn) }

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// Close stops the server the way SIGTERM does: it hands leadership over
// and leaves gossip while the API still answers, so calls in flight finish
// or are forwarded to the new leader, then drains and closes the ports and
// the node.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		if lerr := s.node.Leave(shutdownGrace); lerr != nil {
			s.log.Warn("leave", "err", lerr)
		}
		// Shutdown ends the forwarding streams peers hold open to this
		// node, which GracefulStop would otherwise wait for forever.
		s.api.Shutdown()
		httpserve.Stop(s.apiSrv, shutdownGrace)
		stopGRPC(s.grpc, shutdownGrace)
		err = s.shut()
	})
	return err
}

// HardStop stops the server at once, as kill -9 would: no leadership
// transfer, no gossip leave, calls in flight cut. What the node
// acknowledged is on disk.
func (s *Server) HardStop() {
	s.closed.Do(func() {
		if s.api != nil {
			s.api.Shutdown()
		}
		if s.apiSrv != nil {
			s.apiSrv.Close()
		}
		if s.grpc != nil {
			s.grpc.Stop()
		}
		if err := s.shut(); err != nil {
			s.log.Warn("close", "err", err)
		}
	})
}

// shut closes what is left: the operator endpoints, the background work,
// the node and a listener no server took.
func (s *Server) shut() error {
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	var err error
	if s.node != nil {
		err = s.node.Close()
	}
	if s.grpc == nil && s.grpcLn != nil {
		s.grpcLn.Close()
	}
	if err != nil && !errors.Is(err, cluster.ErrShutdown) {
		return fmt.Errorf("close node: %w", err)
	}
	return nil
}

// stopGRPC drains in-flight calls, then cuts what is left after grace.
func stopGRPC(g *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		g.Stop()
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
