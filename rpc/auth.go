package rpc

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// With authentication on (serve --auth), every call except the health and
// reflection services must carry credentials, and the tenant of every
// Idempotency call comes from them, never from the request:
//
//   - a bearer token ("authorization: Bearer <token>") found in the tokens
//     file, or else
//   - a client certificate verified by the TLS handshake, mapped to a
//     tenant by a CertMapping.
//
// A request whose tenant field is empty is filled in with the caller's
// tenant; one that names another tenant is PermissionDenied. The tenant is
// part of the record key, so a caller can address no other tenant's
// records: not read, complete, release, extend or wait on them. Admin RPCs
// need an admin identity; Status answers anyone authenticated, but only
// with the routing fields (the SDK finds the leader with it) unless the
// caller is an admin.

// Identity is who a caller is, as its credentials say.
type Identity struct {
	// Tenant owns every key the caller addresses.
	Tenant string
	// Admin may call the admin RPCs.
	Admin bool
	// Peer marks another idemnode node forwarding a call it received and
	// authorized itself; the request carries the tenant the origin derived.
	Peer bool
	// Delegate may name any tenant in its requests: a trusted service (an
	// idemnode proxy serving many tenants) that authenticated its own
	// callers. An empty tenant is still its own.
	Delegate bool
	// Via names the credential: "token", "cert" or "peer".
	Via string
}

type identityKey struct{}

// WithIdentity returns ctx marked as authorized as id. The interceptors do
// not authenticate a call whose context is already marked: they only apply
// the tenant and admin rules of id to it.
//
// Contract: only code that has itself established who the caller is may
// mark a context. The forwarding layer is the intended user: a node that
// received a call from a client authorized it there (the interceptors
// filled in the request's tenant); the leader that executes the forwarded
// request must first check that it comes from a peer node (e.g. its
// certificate from the cluster CA) and may then mark the context with
// Identity{Peer: true, Admin: true, Via: "peer"} — the request already
// names the origin's tenant — or with the origin's exact identity. A
// header such as idem-forwarded proves nothing: any client can send it.
// Contexts built from the network never carry the mark (it is a Go value,
// not metadata), so no client can forge it.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity ctx was authorized as.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// AuthConfig configures an Authenticator.
type AuthConfig struct {
	// Tokens, when set, accepts bearer tokens from this table.
	Tokens *TokenTable
	// Certs maps verified client certificates to tenants; the zero value
	// accepts no certificate as a credential.
	Certs CertMapping
	// Admins lists tenants whose identities (token or certificate) are
	// admins; a token line can also say admin itself.
	Admins []string
	// Peers lists the names (CN, DNS or URI SAN) of the certificates of
	// other idemnode nodes. A call over a verified certificate with one of
	// these names is a peer forwarding for a client it authorized.
	Peers []string
	// Delegates lists tenants whose identities (token or certificate) may
	// act for any tenant, naming it in each request (serve --auth-delegate).
	// This trusts them with every tenant's keys: give it to a service that
	// authenticates its own callers, such as an idemnode proxy behind a
	// gateway that sets the tenant.
	Delegates []string
	// MaxTenant bounds the tenant a certificate names (as a request's
	// tenant is bounded); 0 is DefaultLimits().MaxTenant.
	MaxTenant int
	// Log receives refusals at debug level; nil is slog.Default().
	Log *slog.Logger
}

// Authenticator authenticates and authorizes calls; its interceptors go
// first in the chain (after metrics), so that later ones and the handlers
// see the caller's tenant.
type Authenticator struct {
	cfg AuthConfig
	log *slog.Logger
}

// NewAuthenticator checks cfg: at least one kind of credential must be on.
func NewAuthenticator(cfg AuthConfig) (*Authenticator, error) {
	if cfg.Tokens == nil && !cfg.Certs.Enabled() {
		return nil, errors.New("authentication needs a tokens file or a certificate mapping")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxTenant == 0 {
		cfg.MaxTenant = DefaultLimits().MaxTenant
	}
	return &Authenticator{cfg: cfg, log: cfg.Log}, nil
}

// authError refuses a call: Unauthenticated (no valid credentials) or
// PermissionDenied (valid credentials, not allowed).
type authError struct {
	code   codes.Code
	reason string
	msg    string
}

func (e *authError) Error() string { return e.msg }

func unauthenticated(format string, args ...any) error {
	return &authError{codes.Unauthenticated, idempb.ReasonUnauthenticated, fmt.Sprintf(format, args...)}
}

// Method classes decide what a call needs.
type methodClass int

const (
	classOpen   methodClass = iota // health, reflection: public and tenant-free
	classTenant                    // Idempotency: the request's tenant must be the caller's
	classStatus                    // any identity; the answer is redacted for non-admins
	classAdmin                     // admin identities only
	classPeer                      // other idemnode nodes only (forwarding)
)

func classOf(fullMethod string) methodClass {
	service := strings.TrimPrefix(fullMethod[:max(strings.LastIndexByte(fullMethod, '/'), 0)], "/")
	switch {
	case service == "grpc.health.v1.Health", strings.HasPrefix(service, "grpc.reflection."):
		return classOpen
	case service == "idem.v1.Idempotency":
		return classTenant
	case fullMethod == idempb.Admin_Status_FullMethodName:
		return classStatus
	case service == "idem.v1.Forward":
		// Forwarded calls run without the tenant rule: the origin applied it.
		return classPeer
	}
	// The Admin service, and any service added later: closed by default.
	return classAdmin
}

// UnaryInterceptor authenticates and authorizes every unary call.
func (a *Authenticator) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		class := classOf(info.FullMethod)
		if class == classOpen {
			return handler(ctx, req)
		}
		ctx, id, err := a.admit(ctx, class)
		if err == nil {
			err = authorizeTenant(id, req, a.cfg.MaxTenant)
		}
		if err != nil {
			a.log.Debug("call refused", "method", info.FullMethod, "err", err)
			return nil, toStatus(err, a.log)
		}
		resp, err := handler(ctx, req)
		if st, ok := resp.(*idempb.StatusResponse); ok && class == classStatus && !id.Admin {
			resp = redactStatus(st)
		}
		return resp, err
	}
}

// StreamInterceptor authenticates streaming calls; every message a client
// sends on an Idempotency stream is held to the tenant rule.
func (a *Authenticator) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		class := classOf(info.FullMethod)
		if class == classOpen {
			return handler(srv, ss)
		}
		ctx, id, err := a.admit(ss.Context(), class)
		if err != nil {
			a.log.Debug("stream refused", "method", info.FullMethod, "err", err)
			return toStatus(err, a.log)
		}
		return handler(srv, &authorizedStream{ServerStream: ss, ctx: ctx, id: id, maxTenant: a.cfg.MaxTenant, log: a.log})
	}
}

// admit authenticates the caller (unless ctx is already marked, see
// WithIdentity), checks the admin rule of class, and returns ctx marked
// with the identity.
func (a *Authenticator) admit(ctx context.Context, class methodClass) (context.Context, Identity, error) {
	id, marked := IdentityFrom(ctx)
	if !marked {
		var err error
		if id, err = a.authenticate(ctx); err != nil {
			return ctx, Identity{}, err
		}
		ctx = WithIdentity(ctx, id)
		ctx = passToken(ctx)
	}
	if class == classPeer && !id.Peer {
		return ctx, id, &authError{codes.PermissionDenied, idempb.ReasonPeerRequired,
			"only another idemnode node (a certificate of the cluster CA, or one named by --auth-peer) may forward calls"}
	}
	if class == classAdmin && !id.Admin {
		return ctx, id, &authError{codes.PermissionDenied, idempb.ReasonAdminRequired,
			fmt.Sprintf("this call needs an admin identity; tenant %q is not one", id.Tenant)}
	}
	return ctx, id, nil
}

// authenticate derives the identity from the call's credentials: a peer
// node's certificate, else a bearer token, else a client certificate. A
// token that is present but wrong is refused, never passed over for the
// certificate: a caller that presents a bad credential has made a mistake
// worth reporting.
func (a *Authenticator) authenticate(ctx context.Context) (Identity, error) {
	cert := verifiedCert(ctx)
	if fromPeerNode(ctx) || cert != nil && a.isPeer(cert) {
		return Identity{Peer: true, Admin: true, Via: "peer"}, nil
	}
	token, present, err := bearerToken(ctx)
	switch {
	case err != nil:
		return Identity{}, err
	case present && a.cfg.Tokens == nil:
		return Identity{}, unauthenticated("bearer tokens are not accepted by this server")
	case present:
		id, ok := a.cfg.Tokens.lookup(token)
		if !ok {
			return Identity{}, unauthenticated("unknown bearer token")
		}
		id.Admin = id.Admin || slices.Contains(a.cfg.Admins, id.Tenant)
		id.Delegate = slices.Contains(a.cfg.Delegates, id.Tenant)
		return id, nil
	case cert != nil && a.cfg.Certs.Enabled():
		tenant, err := a.cfg.Certs.Tenant(cert)
		if err == nil {
			err = CheckTenantName(tenant, a.cfg.MaxTenant)
		}
		if err != nil {
			return Identity{}, unauthenticated("%v", err)
		}
		return Identity{Tenant: tenant, Admin: slices.Contains(a.cfg.Admins, tenant),
			Delegate: slices.Contains(a.cfg.Delegates, tenant), Via: "cert"}, nil
	}
	return Identity{}, unauthenticated("no credentials: send a client certificate or 'authorization: Bearer <token>'")
}

func (a *Authenticator) isPeer(c *x509.Certificate) bool {
	for _, n := range certNames(c) {
		if n != "" && slices.Contains(a.cfg.Peers, n) {
			return true
		}
	}
	return false
}

// verifiedCert returns the client's leaf certificate if the TLS handshake
// verified it against the server's client CAs; an unverified certificate
// proves nothing and is ignored.
func verifiedCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return nil
	}
	return info.State.PeerCertificates[0]
}

// fromPeerNode reports whether the call came over a connection another
// node opened with the cluster CA's mutual TLS (see tlsconfig.IsPeer).
func fromPeerNode(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && tlsconfig.IsPeer(info.State)
}

// authorizationKey is the metadata key of bearer tokens (gRPC lower-cases
// metadata keys).
const authorizationKey = "authorization"

// bearerToken returns the token of the call's authorization header.
func bearerToken(ctx context.Context) (token string, present bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(authorizationKey)
	switch {
	case len(vals) == 0:
		return "", false, nil
	case len(vals) > 1:
		return "", true, unauthenticated("more than one authorization header")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", true, unauthenticated("the authorization header must be 'Bearer <token>'")
	}
	return strings.TrimSpace(token), true, nil
}

// passToken copies the caller's authorization header into the outgoing
// metadata of ctx, so a request this node forwards to the leader carries
// the caller's own credentials and the leader authenticates it again. (A
// forwarding layer that marks peers with WithIdentity makes this moot; it
// does no harm then.)
func passToken(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get(authorizationKey); len(vals) == 1 {
		return metadata.AppendToOutgoingContext(ctx, authorizationKey, vals[0])
	}
	return ctx
}

// idRequest is every Idempotency request: each names its record by an id.
type idRequest interface{ GetId() *idempb.RecordId }

// authorizeTenant applies the tenant rule to one request: an empty tenant
// becomes the caller's, another tenant is refused. Peers forward requests
// the origin already filled in. A request without an id is left to
// validation, which refuses it; a malformed tenant is refused as invalid
// (InvalidArgument) before it is compared, as it is without --auth.
func authorizeTenant(id Identity, req any, maxTenant int) error {
	r, ok := req.(idRequest)
	if !ok || id.Peer || r.GetId() == nil {
		return nil
	}
	rid := r.GetId()
	switch rid.Tenant {
	case "":
		rid.Tenant = id.Tenant
	case id.Tenant:
	default:
		if err := checkTenant(rid.Tenant, maxTenant); err != nil {
			return err
		}
		if id.Delegate {
			return nil
		}
		return &authError{codes.PermissionDenied, idempb.ReasonTenantMismatch,
			fmt.Sprintf("the request names tenant %q, the credentials tenant %q", rid.Tenant, id.Tenant)}
	}
	return nil
}

// redactStatus keeps what a client needs to find the leader; indices,
// record counts and digests are for operators.
func redactStatus(st *idempb.StatusResponse) *idempb.StatusResponse {
	return &idempb.StatusResponse{NodeId: st.GetNodeId(), State: st.GetState(),
		LeaderId: st.GetLeaderId(), LeaderAddr: st.GetLeaderAddr()}
}

// authorizedStream carries the identity in its context and holds every
// received message to the tenant rule.
type authorizedStream struct {
	grpc.ServerStream
	ctx       context.Context
	id        Identity
	maxTenant int
	log       *slog.Logger
}

func (s *authorizedStream) Context() context.Context { return s.ctx }

func (s *authorizedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := authorizeTenant(s.id, m, s.maxTenant); err != nil {
		return toStatus(err, s.log)
	}
	return nil
}
