package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/idemnode/idemnode/internal/netlimit"
)

// serveAPI serves the HTTP/JSON API on addr (nothing when addr is empty),
// with TLS when tlsConf is set, within the connection caps of lim.
func serveAPI(addr string, h http.Handler, tlsConf *tls.Config, lim netlimit.Config, readTimeout time.Duration,
	errc chan<- error) (*http.Server, net.Listener, error) {
	if addr == "" {
		return nil, nil, nil
	}
	ln, err := ListenLimited(addr, lim)
	if err != nil {
		return nil, nil, err
	}
	srv := NewHTTPServer(h, 5*time.Second, readTimeout)
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
	return srv, ln, nil
}
