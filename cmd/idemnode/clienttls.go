package main

import (
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
