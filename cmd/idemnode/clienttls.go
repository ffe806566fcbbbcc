package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/internal/tlsconfig"
)

// clientTLS are the client subcommands' TLS flags; none given is plaintext.
type clientTLS struct {
	files tlsconfig.ClientFiles
}

func (c *clientTLS) register(fl *pflag.FlagSet) {
	fl.StringVar(&c.files.CA, "tls-ca", "", "dial over TLS, verifying the server with this PEM CA bundle")
	fl.StringVar(&c.files.Cert, "tls-cert", "", "dial over TLS, presenting this PEM client certificate (servers with --tls-client-ca)")
	fl.StringVar(&c.files.Key, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&c.files.ServerName, "tls-server-name", "", "dial over TLS, expecting this name in the server's certificate (default: the host of --addr)")
}

// credentials are those of the connection to --addr. Any TLS flag turns
// TLS on (with the system roots when --tls-ca is not given).
func (c *clientTLS) credentials() (credentials.TransportCredentials, error) {
	return c.credentialsFor(c.files.ServerName)
}

// leaderCredentials are those of a connection to the leader at the address
// --addr reported: the same, but expecting the leader's own name (the host
// of its address), not --tls-server-name.
func (c *clientTLS) leaderCredentials() (credentials.TransportCredentials, error) {
	return c.credentialsFor("")
}

func (c *clientTLS) credentialsFor(serverName string) (credentials.TransportCredentials, error) {
	if !c.files.Enabled() {
		return insecure.NewCredentials(), nil
	}
	f := c.files
	f.ServerName = serverName
	cfg, err := tlsconfig.Client(f)
	if err != nil {
		return nil, fmt.Errorf("--tls-*: %w", err)
	}
	return credentials.NewTLS(cfg), nil
}

// explainRefusal finds out, when a TLS connection to addr broke, whether
// the server refused the client certificate: with TLS 1.3 the server
// checks it after the client's handshake is done, so gRPC reports only a
// broken pipe or EOF. It repeats the handshake and reads the server's
// first bytes, which are then its alert, and says so in e.
func (c *clientTLS) explainRefusal(ctx context.Context, e *callError, addr string) {
	if !c.files.Enabled() || (e.reason != reasonConnectionLost && e.reason != reasonClientCertRequired) {
		return
	}
	cfg, err := tlsconfig.Client(c.files)
	if err != nil {
		return
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	cfg.NextProtos = []string{"h2"} // as gRPC offers it
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err == nil {
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
	}
	switch {
	case err == nil || !strings.Contains(err.Error(), "remote error: tls:"):
		return
	case c.files.Cert == "":
		e.exit, e.reason = exitDenied, reasonClientCertRequired
		e.message = "the server requires a client certificate (--tls-cert, --tls-key)"
	default:
		e.exit, e.reason = exitDenied, reasonClientCertRefused
		e.message = fmt.Sprintf("the server at %s refused the client certificate of --tls-cert (%s): is it signed by a CA the server trusts?",
			addr, from(err.Error(), "tls:"))
	}
}
