// Package httpserve starts and stops the HTTP servers of a node and of the
// proxy the same way: listeners within netlimit's caps, the timeouts that
// keep a slow client from holding a connection, a graceful stop.
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/idemnode/idemnode/internal/netlimit"
)

// Listen listens on addr within the caps of lim.
func Listen(addr string, lim netlimit.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", lim.Name, err)
	}
	return netlimit.Limit(ln, lim), nil
}

// NewServer returns a server of h with the timeouts of every idemnode
// HTTP server: the headers within header, the whole request within read,
// idle keep-alive connections closed after two minutes. A slow body is cut
// at read, and its connection closed. The read deadline ends with the body:
// net/http lifts it when the body has been read (HTTP/2 stops the stream's
// timer), so a long poll waits past it. No write timeout: /v1/wait holds a
// request as long as its timeout, and the proxy as long as its upstream
// takes.
func NewServer(h http.Handler, header, read time.Duration) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: header, ReadTimeout: read, IdleTimeout: 2 * time.Minute}
}

// Serve serves h on addr (nothing when addr is empty), with TLS when
// tlsConf is set, within the connection caps of lim; a failure of the
// server after the start is sent on errc, named by lim.Name.
func Serve(addr string, h http.Handler, tlsConf *tls.Config, lim netlimit.Config, readTimeout time.Duration,
	errc chan<- error) (*http.Server, net.Listener, error) {
	if addr == "" {
		return nil, nil, nil
	}
	ln, err := Listen(addr, lim)
	if err != nil {
		return nil, nil, err
	}
	srv := NewServer(h, 5*time.Second, readTimeout)
	srv.TLSConfig = tlsConf
	go func() {
		var err error
		if tlsConf != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("%s: %w", lim.Name, err)
		}
	}()
	return srv, ln, nil
}

// Stop lets calls in flight finish, then cuts what is left after grace.
func Stop(srv *http.Server, grace time.Duration) {
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
}
