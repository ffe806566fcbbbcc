package main

import (
	"crypto/tls"
	"fmt"

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

// config is the TLS of the connections to --addr, nil for plaintext. Any
// TLS flag turns TLS on (with the system roots when --tls-ca is not given).
func (c *clientTLS) config() (*tls.Config, error) {
	if !c.files.Enabled() {
		return nil, nil
	}
	cfg, err := tlsconfig.Client(c.files)
	if err != nil {
		return nil, fmt.Errorf("--tls-*: %w", err)
	}
	return cfg, nil
}

// credentials are config's as gRPC takes them.
func (c *clientTLS) credentials() (credentials.TransportCredentials, error) {
	cfg, err := c.config()
	if err != nil || cfg == nil {
		return insecure.NewCredentials(), err
	}
	return credentials.NewTLS(cfg), nil
}
