package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/netlimit"
)

// opsHandler serves the operator endpoints: liveness, readiness, metrics,
// and with profiling on, Go's pprof profiles under /debug/pprof/.
func opsHandler(node *cluster.Node, reg *prometheus.Registry, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := node.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	}
	return mux
}

// ServeHTTP serves h on addr (nothing when addr is empty) within the
// connection caps of lim; a failure of the server after the start is sent
// on errc. The proxy serves its operator endpoints with it too.
func ServeHTTP(addr string, h http.Handler, lim netlimit.Config, readTimeout time.Duration, errc chan<- error) (*http.Server, net.Listener, error) {
	if addr == "" {
		return nil, nil, nil
	}
	ln, err := ListenLimited(addr, lim)
	if err != nil {
		return nil, nil, err
	}
	srv := NewHTTPServer(h, 5*time.Second, readTimeout)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	return srv, ln, nil
}

// ListenLimited listens on addr within the caps of lim.
func ListenLimited(addr string, lim netlimit.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", lim.Name, err)
	}
	return netlimit.Limit(ln, lim), nil
}

// NewHTTPServer returns a server of h with the timeouts of every idemnode
// HTTP server: the headers within header, the whole request within read,
// idle keep-alive connections closed after two minutes. A slow body is cut
// at read, and its connection closed. The read deadline ends with the body:
// net/http lifts it when the body has been read (HTTP/2 stops the stream's
// timer), so a long poll waits past it. No write timeout: /v1/wait holds a
// request as long as its timeout, and the proxy as long as its upstream
// takes.
func NewHTTPServer(h http.Handler, header, read time.Duration) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: header, ReadTimeout: read, IdleTimeout: 2 * time.Minute}
}

// StopHTTPServer lets calls in flight finish, then cuts what is left after
// grace.
func StopHTTPServer(srv *http.Server, grace time.Duration) {
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
}
