package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Tokens of the tests: acme and globex are tenants, ops is an admin.
const (
	tokenAcme    = "acme-token-0123456789abcdef"
	tokenGlobex  = "globex-token-0123456789abcdef"
	tokenOps     = "ops-token-0123456789abcdef"
	tokenGateway = "gateway-token-0123456789abcdef"
)

func writeTokens(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatalf("write tokens: %v", err)
	}
	return path
}

func testTokens(t *testing.T) *TokenTable {
	t.Helper()
	tokens, err := LoadTokenTable(writeTokens(t,
		"# tenants",
		HashToken(tokenAcme)+" acme",
		HashToken(tokenGlobex)+"   globex",
		"",
		HashToken(tokenOps)+" ops admin",
		HashToken(tokenGateway)+" gateway",
	), 128)
	if err != nil {
		t.Fatalf("load tokens: %v", err)
	}
	return tokens
}

// bearer sends a token with every call, as client.WithToken does.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// authServer is one node serving the API over TLS with authentication on:
// client certificates of ca are verified when given, tokens are those of
// testTokens, "ops" is admin and CN "node-2" is a peer.
type authServer struct {
	node *cluster.Node
	addr string
	ca   *testCA
}

func mustAuthServer(t *testing.T, node *cluster.Node, limits Limits, before ...grpc.UnaryServerInterceptor) *authServer {
	t.Helper()
	ca := newTestCA(t, "idemnode test CA")
	auth, err := NewAuthenticator(AuthConfig{Tokens: testTokens(t), Certs: mustMapping(t, DefaultCertMapping),
		Admins: []string{"ops"}, Peers: []string{"node-2"}, Delegates: []string{"gateway"}})
	if err != nil {
		t.Fatalf("authenticator: %v", err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.serverCert(t)},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.pool, MinVersion: tls.VersionTLS13})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	g := grpc.NewServer(append(limits.ServerOptions(), grpc.Creds(creds),
		grpc.ChainUnaryInterceptor(append(before, auth.UnaryInterceptor())...),
		grpc.ChainStreamInterceptor(auth.StreamInterceptor()))...)
	NewServer(node, limits, nil).Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return &authServer{node: node, addr: ln.Addr().String(), ca: ca}
}

func mustMapping(t *testing.T, s string) CertMapping {
	t.Helper()
	m, err := ParseCertMapping(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// caller is a client of an authServer with some credentials.
type caller struct {
	conn  *grpc.ClientConn
	api   idempb.IdempotencyClient
	admin idempb.AdminClient
}

// dial connects with the client certificate cert (nil: none) and token
// ("": none), trusting roots for the server.
func (s *authServer) dial(t *testing.T, roots *x509.CertPool, cert *tls.Certificate, token string) *caller {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	conn, err := grpc.NewClient(s.addr, opts...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &caller{conn: conn, api: idempb.NewIdempotencyClient(conn), admin: idempb.NewAdminClient(conn)}
}

func (s *authServer) withToken(t *testing.T, token string) *caller {
	return s.dial(t, s.ca.pool, nil, token)
}

func (s *authServer) withCert(t *testing.T, cert tls.Certificate) *caller {
	return s.dial(t, s.ca.pool, &cert, "")
}

// checkDenied requires code and, when reason is set, that ErrorInfo reason.
func checkDenied(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
	if reason == "" {
		return
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reason {
			return
		}
	}
	t.Fatalf("%s: details %v, want reason %s", what, st.Details(), reason)
}

// mine addresses key in the caller's own tenant: the tenant field is left
// empty for the server to fill in.
func mine(key string) *idempb.RecordId {
	return &idempb.RecordId{Scope: "POST /v1/charges", Key: key}
}

func TestAuthenticatedAPI(t *testing.T) {
	t.Parallel()
	s := mustAuthServer(t, mustNode(t), DefaultLimits())
	ctx := testCtx(t)

	t.Run("no credentials", func(t *testing.T) {
		anon := s.dial(t, s.ca.pool, nil, "")
		_, err := anon.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("k"), Owner: "o"})
		checkDenied(t, "claim", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
		_, err = anon.api.Get(ctx, &idempb.GetRequest{Id: tenantID("acme", "k")})
		checkDenied(t, "get", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
		_, err = anon.admin.Status(ctx, &idempb.StatusRequest{})
		checkDenied(t, "status", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
		// Health stays open: load balancers probe without credentials.
		if _, err := healthpb.NewHealthClient(anon.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health without credentials: %v", err)
		}
	})
	t.Run("bad credentials", func(t *testing.T) {
		_, err := s.withToken(t, "not-a-known-token-at-all").api.Claim(ctx, &idempb.ClaimRequest{Id: mine("k"), Owner: "o"})
		checkDenied(t, "unknown token", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
		basic := metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+tokenAcme)
		_, err = s.dial(t, s.ca.pool, nil, "").api.Get(basic, &idempb.GetRequest{Id: mine("k")})
		checkDenied(t, "basic scheme", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
		// A bad token is refused even beside a good certificate.
		cert := s.ca.tenantCert(t, "acme")
		_, err = s.dial(t, s.ca.pool, &cert, "not-a-known-token-at-all").api.Get(ctx, &idempb.GetRequest{Id: mine("k")})
		checkDenied(t, "bad token with a good cert", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		rogue := newTestCA(t, "rogue CA").tenantCert(t, "acme")
		_, err := s.withCert(t, rogue).api.Claim(ctx, &idempb.ClaimRequest{Id: mine("rogue"), Owner: "o"})
		if err == nil {
			t.Fatal("a certificate from an unknown CA was accepted")
		}
		if _, ok := s.node.Machine().Get(fsmKey("acme", "rogue")); ok {
			t.Fatal("the refused call stored a record")
		}
	})
	t.Run("certificate naming no tenant", func(t *testing.T) {
		plain := s.ca.issue(t, func(c *x509.Certificate) { c.Subject.CommonName = "acme" })
		_, err := s.withCert(t, plain).api.Get(ctx, &idempb.GetRequest{Id: mine("k")})
		checkDenied(t, "cert without tenant URI", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
	})
	t.Run("tenant from certificate and token", func(t *testing.T) {
		for who, c := range map[string]*caller{
			"acme": s.withCert(t, s.ca.tenantCert(t, "acme")), "globex": s.withToken(t, tokenGlobex)} {
			resp, err := c.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("own"), Owner: "o"})
			if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
				t.Fatalf("%s claims its key: %v, %v", who, resp, err)
			}
			got, err := c.api.Get(ctx, &idempb.GetRequest{Id: tenantID(who, "own")})
			if err != nil || got.GetRecord().GetId().GetTenant() != who {
				t.Fatalf("%s reads its key by name: %v, %v", who, got, err)
			}
		}
		// A token decides over a certificate (a gateway's certificate may
		// carry calls for many tenants' tokens).
		cert := s.ca.tenantCert(t, "acme")
		both := s.dial(t, s.ca.pool, &cert, tokenGlobex)
		got, err := both.api.Get(ctx, &idempb.GetRequest{Id: mine("own")})
		if err != nil || got.GetRecord().GetId().GetTenant() != "globex" {
			t.Fatalf("token and cert: %v, %v; want globex's record", got, err)
		}
	})
	t.Run("admin", func(t *testing.T) {
		tenant, ops := s.withToken(t, tokenAcme), s.withToken(t, tokenOps)
		_, err := tenant.admin.Members(ctx, &idempb.MembersRequest{})
		checkDenied(t, "members by a tenant", err, codes.PermissionDenied, idempb.ReasonAdminRequired)
		_, err = tenant.admin.TransferLeadership(ctx, &idempb.TransferLeadershipRequest{})
		checkDenied(t, "transfer by a tenant", err, codes.PermissionDenied, idempb.ReasonAdminRequired)
		stream, err := tenant.admin.Snapshot(ctx, &idempb.SnapshotRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		checkDenied(t, "snapshot by a tenant", err, codes.PermissionDenied, idempb.ReasonAdminRequired)
		if _, err := ops.admin.Members(ctx, &idempb.MembersRequest{}); err != nil {
			t.Fatalf("members by admin: %v", err)
		}
		full, err := ops.admin.Status(ctx, &idempb.StatusRequest{})
		if err != nil || full.GetDigest() == "" || full.GetAppliedIndex() == 0 {
			t.Fatalf("status by admin: %v, %v; want the full status", full, err)
		}
		// A tenant sees what finding the leader needs, nothing more.
		st, err := tenant.admin.Status(ctx, &idempb.StatusRequest{})
		if err != nil || st.GetState() != "leader" || st.GetNodeId() != full.GetNodeId() {
			t.Fatalf("status by a tenant: %v, %v; want the routing fields", st, err)
		}
		if st.GetDigest() != "" || st.GetAppliedIndex() != 0 || st.GetRecords() != 0 || st.GetTerm() != 0 {
			t.Fatalf("status by a tenant reveals %v", st)
		}
	})
	t.Run("forged forwarding header", func(t *testing.T) {
		forged := metadata.AppendToOutgoingContext(ctx, "idem-forwarded", "1")
		_, err := s.dial(t, s.ca.pool, nil, "").api.Claim(forged,
			&idempb.ClaimRequest{Id: tenantID("acme", "forged"), Owner: "o"})
		checkDenied(t, "forwarded header without credentials", err, codes.Unauthenticated, idempb.ReasonUnauthenticated)
		_, err = s.withToken(t, tokenGlobex).api.Claim(forged,
			&idempb.ClaimRequest{Id: tenantID("acme", "forged"), Owner: "o"})
		checkDenied(t, "forwarded header naming another tenant", err, codes.PermissionDenied, idempb.ReasonTenantMismatch)
	})
	t.Run("forwarding stream needs a peer", func(t *testing.T) {
		forward := func(c *caller, key string) error {
			stream, err := idempb.NewForwardClient(c.conn).Calls(ctx)
			if err != nil {
				return err
			}
			if err := stream.Send(&idempb.ForwardBatch{Calls: []*idempb.ForwardCall{{Id: 1,
				Request: &idempb.ForwardCall_Claim{Claim: &idempb.ClaimRequest{Id: tenantID("acme", key), Owner: "o"}}}}}); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			// A Send that meets a stream the server already refused says
			// io.EOF; Recv then gives the server's status.
			r, err := stream.Recv()
			if err != nil {
				return err
			}
			return replyError(r.GetReplies()[0])
		}
		// Even an admin token cannot forward: forwarded calls skip the
		// tenant rule, so only nodes may send them.
		for who, c := range map[string]*caller{"tenant": s.withToken(t, tokenGlobex), "admin": s.withToken(t, tokenOps)} {
			checkDenied(t, who+" forwarding", forward(c, "fwd-"+who), codes.PermissionDenied, idempb.ReasonPeerRequired)
			if _, ok := s.node.Machine().Get(fsmKey("acme", "fwd-"+who)); ok {
				t.Fatalf("a call forwarded by a %s was applied", who)
			}
		}
		peerCert := s.ca.issue(t, func(c *x509.Certificate) { c.Subject.CommonName = "node-2" })
		if err := forward(s.withCert(t, peerCert), "fwd-peer"); err != nil {
			t.Fatalf("a peer forwarding: %v", err)
		}
		if _, ok := s.node.Machine().Get(fsmKey("acme", "fwd-peer")); !ok {
			t.Fatal("the peer's forwarded claim was not applied")
		}
	})
	t.Run("peer certificate", func(t *testing.T) {
		peerCert := s.ca.issue(t, func(c *x509.Certificate) { c.Subject.CommonName = "node-2" })
		p := s.withCert(t, peerCert)
		resp, err := p.api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("acme", "via-peer"), Owner: "o"})
		if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("claim forwarded by a peer: %v, %v", resp, err)
		}
		if _, ok := s.node.Machine().Get(fsmKey("acme", "via-peer")); !ok {
			t.Fatal("the peer's claim is not under the tenant its request names")
		}
	})
}

// TestAnotherTenantIsRefused: every Idempotency call that names another
// tenant than the credentials' is PermissionDenied and touches nothing.
func TestAnotherTenantIsRefused(t *testing.T) {
	t.Parallel()
	s := mustAuthServer(t, mustNode(t), DefaultLimits())
	ctx := testCtx(t)
	globex := s.withToken(t, tokenGlobex)
	resp, err := globex.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("k"), Owner: "o"})
	if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("globex claims: %v, %v", resp, err)
	}
	acme := s.withCert(t, s.ca.tenantCert(t, "acme"))
	theirs := tenantID("globex", "k")
	token := resp.GetToken()
	calls := map[string]func() error{
		"claim": func() error { _, err := acme.api.Claim(ctx, &idempb.ClaimRequest{Id: theirs, Owner: "o"}); return err },
		"complete": func() error {
			_, err := acme.api.Complete(ctx, &idempb.CompleteRequest{Id: theirs, Token: token})
			return err
		},
		"release": func() error {
			_, err := acme.api.Release(ctx, &idempb.ReleaseRequest{Id: theirs, Token: token})
			return err
		},
		"extend": func() error {
			_, err := acme.api.Extend(ctx, &idempb.ExtendRequest{Id: theirs, Token: token})
			return err
		},
		"get": func() error { _, err := acme.api.Get(ctx, &idempb.GetRequest{Id: theirs}); return err },
		"wait": func() error {
			_, err := acme.api.Wait(ctx, &idempb.WaitRequest{Id: theirs, Timeout: dur(time.Second)})
			return err
		},
	}
	for name, call := range calls {
		checkDenied(t, name, call(), codes.PermissionDenied, idempb.ReasonTenantMismatch)
	}
	r, ok := s.node.Machine().Get(fsmKey("globex", "k"))
	if !ok || r.Token != token || r.State.String() != "pending" {
		t.Fatalf("globex's record after acme's refused calls: %+v", r)
	}
}

// TestTextRulesWithAuth sends the rows of textCases to a server with
// authentication on: a malformed tenant is InvalidArgument naming the
// field and the rule, as without --auth, not a tenant mismatch; and
// nothing is stored.
func TestTextRulesWithAuth(t *testing.T) {
	t.Parallel()
	s := mustAuthServer(t, mustNode(t), DefaultLimits())
	acme := s.withToken(t, tokenAcme)
	for _, tc := range textCases() {
		t.Run(tc.name, func(t *testing.T) {
			checkInvalid(t, tc.call(testCtx(t), acme.api), tc.field)
			if n := s.node.Machine().Len(); n != 0 {
				t.Errorf("after a refused call, %d records are stored", n)
			}
		})
	}
}

// TestDelegate: a delegate's credentials (serve --auth-delegate) may name
// any tenant, whose key it then is: the tenant's own credentials find the
// record. An empty tenant is the delegate's own; a delegate is no admin.
func TestDelegate(t *testing.T) {
	t.Parallel()
	s := mustAuthServer(t, mustNode(t), DefaultLimits())
	gw, acme := s.withToken(t, tokenGateway), s.withToken(t, tokenAcme)
	ctx := testCtx(t)
	for _, tenant := range []string{"acme", "globex", ""} {
		resp, err := gw.api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID(tenant, "delegated"), Owner: "o"})
		if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("the delegate claims for %q: %v, %v", tenant, resp, err)
		}
	}
	if _, ok := s.node.Machine().Get(fsmKey("gateway", "delegated")); !ok {
		t.Fatal("an empty tenant was not the delegate's own")
	}
	got, err := acme.api.Get(ctx, &idempb.GetRequest{Id: mine("delegated")})
	if err != nil || got.GetOutcome() != idempb.Outcome_OUTCOME_OK {
		t.Fatalf("acme reads the record the delegate claimed for it: %v, %v", got, err)
	}
	_, err = gw.api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("bad tenant", "k"), Owner: "o"})
	checkDenied(t, "a delegate naming an invalid tenant", err, codes.InvalidArgument, idempb.ReasonInvalidField)
	_, err = gw.admin.Members(ctx, &idempb.MembersRequest{})
	checkDenied(t, "members by a delegate", err, codes.PermissionDenied, idempb.ReasonAdminRequired)
	_, err = acme.api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("globex", "k"), Owner: "o"})
	checkDenied(t, "a tenant that is no delegate naming another", err, codes.PermissionDenied, idempb.ReasonTenantMismatch)
}

// TestWithIdentityMark shows the contract of WithIdentity: a context marked
// before the Authenticator's interceptor is not authenticated again, but
// still held to the mark's tenant.
func TestWithIdentityMark(t *testing.T) {
	t.Parallel()
	var mark Identity
	marker := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(WithIdentity(ctx, mark), req)
	}
	s := mustAuthServer(t, mustNode(t), DefaultLimits(), marker)
	anon := s.dial(t, s.ca.pool, nil, "")
	ctx := testCtx(t)

	mark = Identity{Tenant: "acme", Via: "test"}
	_, err := anon.api.Claim(ctx, &idempb.ClaimRequest{Id: tenantID("globex", "k"), Owner: "o"})
	checkDenied(t, "marked acme naming globex", err, codes.PermissionDenied, idempb.ReasonTenantMismatch)
	resp, err := anon.api.Claim(ctx, &idempb.ClaimRequest{Id: mine("k"), Owner: "o"})
	if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("marked acme claims its own key: %v, %v", resp, err)
	}
	if _, ok := s.node.Machine().Get(fsmKey("acme", "k")); !ok {
		t.Fatal("the marked tenant was not filled in")
	}
	mark = Identity{Peer: true, Admin: true, Via: "peer"}
	if _, err := anon.admin.Members(ctx, &idempb.MembersRequest{}); err != nil {
		t.Fatalf("members by a marked peer: %v", err)
	}
}

func TestTokenFile(t *testing.T) {
	good := HashToken(tokenAcme)
	for name, tc := range map[string]struct {
		line string
		err  string
	}{
		"tenant":           {good + " acme", ""},
		"admin":            {good + " ops admin", ""},
		"short hash":       {good[:62] + " acme", "64 hex digits"},
		"long hash":        {good + "00 acme", "64 hex digits"},
		"not hex":          {strings.Repeat("z", 64) + " acme", "64 hex digits"},
		"no tenant":        {good, "fields"},
		"unknown flag":     {good + " acme root", "fields"},
		"too many fields":  {good + " acme admin x", "fields"},
		"tenant too long":  {good + " " + strings.Repeat("t", 129), "tenant"},
		"tenant not UTF-8": {good + " \xff", "tenant"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadTokenTable(writeTokens(t, tc.line), 128)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), tokenAcme) {
				t.Fatal("an error shows a token")
			}
		})
	}
	if _, err := LoadTokenTable(writeTokens(t, good+" acme", good+" globex"), 128); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("duplicate hash: %v, want an error on line 2", err)
	}
}

func TestTokenReloadSwapsOrKeeps(t *testing.T) {
	path := writeTokens(t, HashToken(tokenAcme)+" acme")
	tokens, err := LoadTokenTable(path, 128)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tokens.lookup(tokenAcme); !ok || id.Tenant != "acme" || id.Admin {
		t.Fatalf("lookup acme = %+v, %v", id, ok)
	}
	if _, ok := tokens.lookup(tokenAcme + "x"); ok {
		t.Fatal("a different token was accepted")
	}
	// Rotate: acme's token out, globex's in.
	if err := os.WriteFile(path, []byte(HashToken(tokenGlobex)+" globex admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := tokens.Reload(); err != nil || n != 1 {
		t.Fatalf("reload = %d, %v", n, err)
	}
	if _, ok := tokens.lookup(tokenAcme); ok {
		t.Fatal("a removed token still works after reload")
	}
	if id, ok := tokens.lookup(tokenGlobex); !ok || !id.Admin {
		t.Fatalf("lookup globex = %+v, %v", id, ok)
	}
	// A broken file leaves the table in use as it was.
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Reload(); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if _, ok := tokens.lookup(tokenGlobex); !ok || tokens.Len() != 1 {
		t.Fatal("a failed reload changed the table")
	}
}

func TestCertMapping(t *testing.T) {
	ca := newTestCA(t, "ca")
	cert := ca.issue(t, func(c *x509.Certificate) {
		c.Subject.CommonName = "cn-tenant"
		c.DNSNames = []string{"acme.tenants.example", "other.example"}
		c.URIs = []*url.URL{mustURL(t, "spiffe://example/ns/x"), mustURL(t, "idemnode://tenant/acme-uri")}
	}).Leaf
	twoURIs := ca.issue(t, func(c *x509.Certificate) {
		c.URIs = []*url.URL{mustURL(t, "idemnode://tenant/a"), mustURL(t, "idemnode://tenant/b")}
	}).Leaf
	for _, tc := range []struct {
		mapping string
		cert    *x509.Certificate
		want    string // "" means an error
	}{
		{"cn", cert, "cn-tenant"},
		{DefaultCertMapping, cert, "acme-uri"},
		{"san-dns-suffix:.tenants.example", cert, "acme"},
		{"san-dns-suffix:.nowhere.example", cert, ""},
		{"san-uri-prefix:idemnode://other/", cert, ""},
		{DefaultCertMapping, twoURIs, ""},
	} {
		got, err := mustMapping(t, tc.mapping).Tenant(tc.cert)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%s: %q, %v; want %q", tc.mapping, got, err, tc.want)
		}
		if err != nil && !errors.Is(err, errNoTenantInCert) {
			t.Errorf("%s: error %v does not wrap errNoTenantInCert", tc.mapping, err)
		}
	}
	for _, bad := range []string{"", "CN", "san-uri-prefix:", "san-dns-suffix:tenants.example", "san-dns-suffix:.", "uri:x"} {
		if _, err := ParseCertMapping(bad); err == nil {
			t.Errorf("ParseCertMapping(%q) accepted", bad)
		}
	}
	if m := mustMapping(t, "none"); m.Enabled() || m.String() != "none" {
		t.Errorf("none: %+v", m)
	}
}

func TestPassTokenToLeader(t *testing.T) {
	in := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer x"))
	md, _ := metadata.FromOutgoingContext(passToken(in))
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer x" {
		t.Fatalf("outgoing authorization %v", got)
	}
	md, _ = metadata.FromOutgoingContext(passToken(context.Background()))
	if len(md) != 0 {
		t.Fatalf("outgoing metadata %v without a token", md)
	}
}

func fsmKey(tenant, key string) fsm.RecordKey {
	return fsm.RecordKey{Tenant: tenant, Scope: "POST /v1/charges", Key: key}
}
