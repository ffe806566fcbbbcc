package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// startAPI serves the HTTP/JSON API on addr (nothing when addr is empty),
// with TLS when tlsConf is set. Wait holds a request open as long as its
// timeout, so no write timeout cuts it.
func startAPI(addr string, h http.Handler, tlsConf *tls.Config, errc chan<- error) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen api: %w", err)
	}
	srv := &http.Server{Handler: h, TLSConfig: tlsConf, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
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
