package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc"
)

// authFlags are serve's flags for tenants from credentials and for the
// per-tenant limits.
type authFlags struct {
	enabled    bool
	tokensFile string
	certTenant string
	admins     []string
	peers      []string
	delegates  []string

	claimRate  float64
	claimBurst int
	maxKeys    uint64
	maxBytes   uint64
}

func (a *authFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&a.enabled, "auth", false, "take each call's tenant from its credentials (a bearer token or a client certificate), never from the request")
	fl.StringVar(&a.tokensFile, "auth-tokens-file", "", "file of '<sha256-hex> <tenant> [admin]' lines (see 'idemnode auth hash-token'); re-read on change and SIGHUP")
	fl.StringVar(&a.certTenant, "auth-cert-tenant", rpc.DefaultCertMapping,
		"how a verified client certificate names its tenant: san-uri-prefix:<prefix>, san-dns-suffix:.<suffix>, cn or none")
	fl.StringSliceVar(&a.admins, "auth-admin", nil, "tenants whose credentials may call the admin RPCs (comma-separated)")
	fl.StringSliceVar(&a.peers, "auth-peer", nil,
		"certificate names (CN, DNS or URI SAN) of the other nodes, whose forwarded calls carry the tenant their origin derived")
	fl.StringSliceVar(&a.delegates, "auth-delegate", nil,
		"tenants whose credentials may act for any tenant, naming it in each request: an idemnode proxy serving many tenants (comma-separated)")
	fl.Float64Var(&a.claimRate, "tenant-claim-rate", 0, "claims per second one tenant may send to this node (0: unlimited)")
	fl.IntVar(&a.claimBurst, "tenant-claim-burst", 0, "claims one tenant may send at once (default: the rate, at least 1)")
	fl.Uint64Var(&a.maxKeys, "tenant-max-keys", 0, "records one tenant may store, cluster-wide (0: unlimited)")
	fl.Uint64Var(&a.maxBytes, "tenant-max-bytes", 0, "bytes one tenant may store, cluster-wide (0: unlimited)")
}

// validate checks the flags; clientCerts says whether the server verifies
// client certificates at all.
func (a *authFlags) validate(fl *pflag.FlagSet, clientCerts bool) error {
	if !a.enabled {
		for _, name := range []string{"auth-tokens-file", "auth-cert-tenant", "auth-admin", "auth-peer", "auth-delegate"} {
			if fl.Changed(name) {
				return fmt.Errorf("--%s needs --auth", name)
			}
		}
	}
	if a.enabled && a.tokensFile == "" && (!clientCerts || a.certTenant == "none") {
		return errors.New("--auth needs --auth-tokens-file, or client certificates (--tls-client-ca) with --auth-cert-tenant")
	}
	if _, err := rpc.ParseCertMapping(a.certTenant); err != nil {
		return fmt.Errorf("--auth-cert-tenant: %w", err)
	}
	if a.claimRate < 0 || a.claimBurst < 0 {
		return fmt.Errorf("--tenant-claim-rate and --tenant-claim-burst must not be negative")
	}
	if a.claimBurst == 0 {
		a.claimBurst = max(1, int(a.claimRate))
	}
	return nil
}

// applyLimits puts the tenant quotas into the API's limits.
func (a *authFlags) applyLimits(l *rpc.Limits) {
	l.TenantMaxKeys, l.TenantMaxBytes = a.maxKeys, a.maxBytes
}

// interceptors returns the unary and stream interceptors the flags ask for,
// authentication first (it fills in the tenant the rate counts against),
// and the tokens table to watch for changes (nil without one).
func (a *authFlags) interceptors(maxTenant int, log *slog.Logger) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor, *rpc.TokenTable, error) {
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	var tokens *rpc.TokenTable
	if a.enabled {
		var err error
		if a.tokensFile != "" {
			if tokens, err = rpc.LoadTokenTable(a.tokensFile, maxTenant); err != nil {
				return nil, nil, nil, err
			}
		}
		certs, _ := rpc.ParseCertMapping(a.certTenant) // checked by validate
		auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens, Certs: certs, Admins: a.admins,
			Peers: a.peers, Delegates: a.delegates, MaxTenant: maxTenant, Log: log})
		if err != nil {
			return nil, nil, nil, err
		}
		unary, stream = append(unary, auth.UnaryInterceptor()), append(stream, auth.StreamInterceptor())
	} else {
		log.Warn("authentication is off: every call names its own tenant; run with --auth in production")
	}
	if a.claimRate > 0 {
		rate, err := rpc.NewClaimRateLimit(a.claimRate, a.claimBurst)
		if err != nil {
			return nil, nil, nil, err
		}
		unary = append(unary, rate.UnaryInterceptor())
	}
	return unary, stream, tokens, nil
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
