package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc"
	idemserver "github.com/idemnode/idemnode/server"
)

// authFlags are serve's flags for tenants from credentials (server.Auth)
// and for the per-tenant quotas.
type authFlags struct {
	idemserver.Auth
	maxKeys  uint64
	maxBytes uint64
}

func (a *authFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&a.Enabled, "auth", false, "take each call's tenant from its credentials (a bearer token or a client certificate), never from the request")
	fl.StringVar(&a.TokensFile, "auth-tokens-file", "", "file of '<sha256-hex> <tenant> [admin]' lines (see 'idemnode auth hash-token'); re-read on change and SIGHUP")
	fl.StringVar(&a.CertTenant, "auth-cert-tenant", rpc.DefaultCertMapping,
		"how a verified client certificate names its tenant: san-uri-prefix:<prefix>, san-dns-suffix:.<suffix>, cn or none")
	fl.StringSliceVar(&a.Admins, "auth-admin", nil, "tenants whose credentials may call the admin RPCs (comma-separated)")
	fl.StringSliceVar(&a.Peers, "auth-peer", nil,
		"certificate names (CN, DNS or URI SAN) of the other nodes, whose forwarded calls carry the tenant their origin derived")
	fl.StringSliceVar(&a.Delegates, "auth-delegate", nil,
		"tenants whose credentials may act for any tenant, naming it in each request: an idemnode proxy serving many tenants (comma-separated)")
	fl.Float64Var(&a.ClaimRate, "tenant-claim-rate", 0, "claims per second one tenant may send to this node (0: unlimited)")
	fl.IntVar(&a.ClaimBurst, "tenant-claim-burst", 0, "claims one tenant may send at once (default: the rate, at least 1)")
	fl.Uint64Var(&a.maxKeys, "tenant-max-keys", 0, "records one tenant may store, cluster-wide (0: unlimited)")
	fl.Uint64Var(&a.maxBytes, "tenant-max-bytes", 0, "bytes one tenant may store, cluster-wide (0: unlimited)")
}

// validate refuses the auth flags given without --auth; the server checks
// the rest (server.Auth).
func (a *authFlags) validate(fl *pflag.FlagSet) error {
	if !a.Enabled {
		for _, name := range []string{"auth-tokens-file", "auth-cert-tenant", "auth-admin", "auth-peer", "auth-delegate"} {
			if fl.Changed(name) {
				return fmt.Errorf("--%s needs --auth", name)
			}
		}
	}
	return nil
}

// clientAuth are the client subcommands' credential flags.
type clientAuth struct {
	token     string
	tokenFile string
}

func (c *clientAuth) register(fl *pflag.FlagSet) {
	fl.StringVar(&c.token, "auth-token", "", "bearer token for a server with --auth (or IDEMNODE_AUTH_TOKEN)")
	fl.StringVar(&c.tokenFile, "auth-token-file", "", "file holding the bearer token")
}

// dialOptions returns the per-call credentials of the flags. The CLI
// dials in plaintext, so the token is allowed over it; in production the
// server's port should only be reachable over TLS.
func (c *clientAuth) dialOptions() ([]grpc.DialOption, error) {
	token := c.token
	switch {
	case c.token != "" && c.tokenFile != "":
		return nil, errors.New("--auth-token and --auth-token-file are exclusive")
	case c.tokenFile != "":
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--auth-token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, errors.New("--auth-token-file is empty")
		}
	}
	if token == "" {
		return nil, nil
	}
	return []grpc.DialOption{client.WithInsecureToken(token)}, nil
}

// minTokenBytes refuses tokens short enough to guess.
const minTokenBytes = 16

func newAuthCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Manage the credentials of a server with --auth"}
	cmd.AddCommand(newHashTokenCmd())
	return cmd
}

func newHashTokenCmd() *cobra.Command {
	var tenant string
	var admin bool
	cmd := &cobra.Command{
		Use:   "hash-token",
		Short: "Read a bearer token from stdin and print its line for --auth-tokens-file",
		Long: "Reads one token from stdin and prints '<sha256-hex> <tenant> [admin]', the line of the tokens\n" +
			"file that grants it; the file never holds the token itself. For example:\n" +
			"  openssl rand -hex 32 > acme.token\n" +
			"  idemnode auth hash-token --tenant acme < acme.token >> tokens",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := readAll(os.Stdin)
			if err != nil {
				return runtimeError{fmt.Errorf("read token from stdin: %w", err)}
			}
			token := strings.TrimSpace(string(b))
			if len(token) < minTokenBytes || strings.ContainsAny(token, " \t\r\n") {
				return fmt.Errorf("the token must be one word of at least %d bytes (e.g. openssl rand -hex 32)", minTokenBytes)
			}
			if err := rpc.CheckTenantName(tenant, rpc.DefaultLimits().MaxTenant); err != nil {
				return fmt.Errorf("--tenant: %w", err)
			}
			line := rpc.HashToken(token) + " " + tenant
			if admin {
				line += " admin"
			}
			fmt.Println(line)
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant the token authenticates (required)")
	cmd.Flags().BoolVar(&admin, "admin", false, "the token may also call the admin RPCs")
	return cmd
}
