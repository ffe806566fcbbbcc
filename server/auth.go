package server

import (
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/rpc"
)

// Auth takes each call's tenant from its credentials and limits tenants.
type Auth struct {
	// Enabled takes the tenant from a bearer token or a client certificate,
	// never from the request.
	Enabled bool
	// TokensFile holds '<sha256-hex> <tenant> [admin]' lines, re-read on
	// change and on Reload.
	TokensFile string
	// CertTenant is how a verified client certificate names its tenant
	// (rpc.ParseCertMapping; empty: rpc.DefaultCertMapping).
	CertTenant string
	// Admins may call the admin RPCs; Peers are the certificate names of
	// the other nodes; Delegates may act for any tenant (a proxy).
	Admins, Peers, Delegates []string
	// ClaimRate is the claims per second one tenant may send to this node
	// (0: unlimited); ClaimBurst those it may send at once (0: the rate,
	// at least 1).
	ClaimRate  float64
	ClaimBurst int
}

// check refuses what cannot work; clientCerts says whether the server
// verifies client certificates at all.
func (a *Auth) check(clientCerts bool) error {
	if a.Enabled && a.TokensFile == "" && (!clientCerts || a.CertTenant == "none") {
		return errors.New("--auth needs --auth-tokens-file, or client certificates (--tls-client-ca) with --auth-cert-tenant")
	}
	if _, err := rpc.ParseCertMapping(a.CertTenant); err != nil {
		return fmt.Errorf("--auth-cert-tenant: %w", err)
	}
	if a.ClaimRate < 0 || a.ClaimBurst < 0 {
		return fmt.Errorf("--tenant-claim-rate and --tenant-claim-burst must not be negative")
	}
	return nil
}

// interceptors returns the unary and stream interceptors a asks for,
// authentication first (it fills in the tenant the rate counts against),
// and the tokens table to watch for changes (nil without one).
func (a *Auth) interceptors(maxTenant int, log *slog.Logger) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor, *rpc.TokenTable, error) {
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	var tokens *rpc.TokenTable
	if a.Enabled {
		var err error
		if a.TokensFile != "" {
			if tokens, err = rpc.LoadTokenTable(a.TokensFile, maxTenant); err != nil {
				return nil, nil, nil, err
			}
		}
		certs, _ := rpc.ParseCertMapping(a.CertTenant) // checked by check
		auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens, Certs: certs, Admins: a.Admins,
			Peers: a.Peers, Delegates: a.Delegates, MaxTenant: maxTenant, Log: log})
		if err != nil {
			return nil, nil, nil, err
		}
		unary, stream = append(unary, auth.UnaryInterceptor()), append(stream, auth.StreamInterceptor())
	} else {
		log.Warn("authentication is off: every call names its own tenant; run with --auth in production")
	}
	if a.ClaimRate > 0 {
		burst := a.ClaimBurst
		if burst == 0 {
			burst = max(1, int(a.ClaimRate))
		}
		rate, err := rpc.NewClaimRateLimit(a.ClaimRate, burst)
		if err != nil {
			return nil, nil, nil, err
		}
		unary = append(unary, rate.UnaryInterceptor())
	}
	return unary, stream, tokens, nil
}
