package main

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

// startAPI serves the HTTP/JSON API on addr (nothing when addr is empty),
// with TLS when tlsConf is set, within the connection caps of lim.
func startAPI(addr string, h http.Handler, tlsConf *tls.Config, lim netlimit.Config, readTimeout time.Duration,
	errc chan<- error) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := listenLimited(addr, lim)
	if err != nil {
		return nil, err
	}
	srv := newHTTPServer(h, 5*time.Second, readTimeout)
	srv.TLSConfig = tlsConf
	go func() {
		var err error
		if tlsConf != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("api: %w", err)
		}
	}()
	return srv, nil
}

// listenLimited listens on addr within the caps of lim.
func listenLimited(addr string, lim netlimit.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", lim.Name, err)
	}
	return netlimit.Limit(ln, lim), nil
}

// newHTTPServer returns a server of h with the timeouts of every idemnode
// HTTP server: the headers within header, the whole request within read,
// idle keep-alive connections closed after two minutes. A slow body is cut
// at read, and its connection closed. The read deadline ends with the body:
// net/http lifts it when the body has been read (HTTP/2 stops the stream's
// timer), so a long poll waits past it. No write timeout: /v1/wait holds a
// request as long as its timeout, and the proxy as long as its upstream
// takes.
func newHTTPServer(h http.Handler, header, read time.Duration) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: header, ReadTimeout: read, IdleTimeout: 2 * time.Minute}
}

// stopHTTPServer lets calls in flight finish, then cuts what is left after
// grace.
func stopHTTPServer(srv *http.Server, grace time.Duration) {
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
}
