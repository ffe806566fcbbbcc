package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/idemnode/idemnode/internal/httpserve"
	"github.com/idemnode/idemnode/internal/netlimit"
)

// ServerConfig is a running proxy's configuration: the handler's Config,
// the addresses it serves and the connection caps of their listeners.
type ServerConfig struct {
	Config
	// Listen is the proxy's address; HTTPAddr serves /healthz, /readyz
	// and /metrics ("" serves none).
	Listen, HTTPAddr string
	// Conns bound the listeners' connections.
	Conns Conns
}

// Conns bound what clients may hold of the proxy's listeners.
type Conns struct {
	// MaxPerIP is the most connections one address holds on each listener
	// (0: no cap).
	MaxPerIP int
	// FDReserve is what the caps leave of the open-file limit (0: 1024, at
	// most half the limit).
	FDReserve int
	// ReadTimeout is the time an HTTP client has to send a whole request
	// (0: unbounded).
	ReadTimeout time.Duration
	// Proxy and HTTP are the caps of Listen and HTTPAddr; a cap not Set is
	// lowered to fit the open-file limit.
	Proxy, HTTP netlimit.Cap
}

// Server is a running proxy.
type Server struct {
	srv, ops *http.Server
	ln       net.Listener
	errc     chan error
	// stop ends the cluster's readiness probe.
	stop context.CancelFunc
	// grace is how long Close lets guarded requests in flight finish.
	grace time.Duration
}

// ConfigError is a configuration Start refuses: the caller's input, not a
// failure at run time.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Start serves the proxy on cfg.Listen, and its operator endpoints on
// cfg.HTTPAddr, until Close. A configuration it refuses is a
// *ConfigError (the command exits 2 on it, 1 on the others).
func Start(cfg ServerConfig) (*Server, error) {
	c := cfg.Conns
	if c.MaxPerIP < 0 || c.FDReserve < 0 || c.ReadTimeout < 0 {
		return nil, &ConfigError{Err: errors.New("--max-conns-per-ip, --fd-reserve and --read-timeout must not be negative")}
	}
	if cfg.Logger == nil {
		return nil, errors.New("proxy: ServerConfig.Logger is nil")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lims, err := netlimit.FitListeners([]netlimit.ListenCap{{Name: "proxy", Cap: c.Proxy, On: true}, {Name: "http", Cap: c.HTTP, On: cfg.HTTPAddr != ""}},
		c.MaxPerIP, c.FDReserve, netlimit.NewMetrics(reg), cfg.Logger)
	if caps := (*netlimit.CapsError)(nil); errors.As(err, &caps) {
		return nil, &ConfigError{Err: err}
	}
	if err != nil {
		return nil, err
	}
	cfg.Metrics = reg
	h, err := New(cfg.Config)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	ln, err := httpserve.Listen(cfg.Listen, lims[0])
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{ln: ln, errc: make(chan error, 2), stop: stop,
		// The SDK finishes a call's record within 10s.
		grace: cmp.Or(max(cfg.UpstreamTimeout, 0), 60*time.Second) + cmp.Or(max(cfg.UpstreamBodyTimeout, 0), 5*time.Minute) + 15*time.Second}
	ready := WatchCluster(ctx, cfg.Client, 2*time.Second, cfg.Logger)
	s.srv = httpserve.NewServer(h, 10*time.Second, c.ReadTimeout)
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("proxy: %w", err)
		}
	}()
	s.ops, _, err = httpserve.Serve(cfg.HTTPAddr, OpsHandler(reg, ready), nil, lims[1], c.ReadTimeout, s.errc)
	if err != nil {
		stop()
		s.srv.Close()
		return nil, err
	}
	return s, nil
}

// Addr is the address the proxy serves on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Err delivers a failure of a listener after the start.
func (s *Server) Err() <-chan error { return s.errc }

// Close stops the proxy. Guarded requests in flight finish and record
// their answer first: cut off, their keys would stay pending and the
// retries would run the upstream again after the lease. The caller closes
// the cluster client after Close.
func (s *Server) Close() {
	s.stop()
	httpserve.Stop(s.srv, s.grace)
	if s.ops != nil {
		s.ops.Close()
	}
}
