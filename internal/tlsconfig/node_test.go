package tlsconfig

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/idemnode/idemnode/internal/testpki"
)

// pki is the material of one test: a cluster CA, a client CA, a stranger
// CA, and the files of a node.
type pki struct {
	cluster, clients, stranger *testpki.CA
	dir                        string
	files                      NodeFiles
}

func newPKI(t *testing.T) *pki {
	p := &pki{cluster: testpki.NewCA(t, "cluster"), clients: testpki.NewCA(t, "clients"),
		stranger: testpki.NewCA(t, "stranger"), dir: t.TempDir()}
	p.files.Cert, p.files.Key = p.cluster.Issue(t, "node1", "127.0.0.1").Write(t, p.dir, "node1")
	p.files.ClientCA = testpki.WriteFile(t, p.dir, "clients.crt", p.clients.PEM)
	p.files.PeerCA = testpki.WriteFile(t, p.dir, "cluster.crt", p.cluster.PEM)
	return p
}

func (p *pki) load(t *testing.T, f NodeFiles) *Node {
	t.Helper()
	n, err := LoadNode(f, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// serveHealth runs a gRPC server with n's configuration and returns its
// address; the server notes whether the last caller was a peer.
func serveHealth(t *testing.T, n *Node, lastPeer *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(n.GRPCServer())),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if p, ok := peer.FromContext(ctx); ok && lastPeer != nil {
				info, _ := p.AuthInfo.(credentials.TLSInfo)
				lastPeer.Store(IsPeer(info.State))
			}
			return h(ctx, req)
		}))
	healthpb.RegisterHealthServer(g, health.NewServer())
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

func check(addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func clientConfig(ca *testpki.CA, cert *testpki.Pair, t *testing.T) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS(t)}
	}
	return c
}

// TestClientCertificates: with a client CA, only clients presenting a
// certificate it signed get an answer; plaintext never does.
func TestClientCertificates(t *testing.T) {
	p := newPKI(t)
	addr := serveHealth(t, p.load(t, p.files), nil)
	good := p.clients.IssueClient(t, "acme")
	foreign := p.stranger.IssueClient(t, "mallory")
	clusterSigned := p.cluster.IssueClient(t, "not-a-client")
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{"client CA certificate", credentials.NewTLS(clientConfig(p.cluster, &good, t)), true},
		{"no certificate", credentials.NewTLS(clientConfig(p.cluster, nil, t)), false},
		{"certificate of another CA", credentials.NewTLS(clientConfig(p.cluster, &foreign, t)), false},
		{"cluster CA certificate on the client name", credentials.NewTLS(clientConfig(p.cluster, &clusterSigned, t)), false},
		{"server not trusted", credentials.NewTLS(clientConfig(p.stranger, &good, t)), false},
		{"plaintext", insecure.NewCredentials(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(addr, tc.creds)
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want success %v", err, tc.ok)
			}
		})
	}
}

// TestNoClientCA: without a client CA, clients need no certificate.
func TestNoClientCA(t *testing.T) {
	p := newPKI(t)
	f := p.files
	f.ClientCA = ""
	addr := serveHealth(t, p.load(t, f), nil)
	if err := check(addr, credentials.NewTLS(clientConfig(p.cluster, nil, t))); err != nil {
		t.Fatal(err)
	}
}

// TestPeerConnections: a node dialling with PeerServerName is served the
// peer protocol: its cluster CA certificate is required and marks it a
// peer; a stranger, or a client certificate, is refused.
func TestPeerConnections(t *testing.T) {
	p := newPKI(t)
	var lastPeer atomic.Bool
	addr := serveHealth(t, p.load(t, p.files), &lastPeer)

	other := p.files
	other.Cert, other.Key = p.cluster.Issue(t, "node2", "127.0.0.2").Write(t, p.dir, "node2")
	if err := check(addr, credentials.NewTLS(p.load(t, other).PeerClient())); err != nil {
		t.Fatalf("peer refused: %v", err)
	}
	if !lastPeer.Load() {
		t.Error("a peer's call is not marked IsPeer")
	}

	stranger := NodeFiles{PeerCA: testpki.WriteFile(t, p.dir, "stranger.crt", p.stranger.PEM)}
	stranger.Cert, stranger.Key = p.stranger.Issue(t, "node9", "127.0.0.9").Write(t, p.dir, "node9")
	if err := check(addr, credentials.NewTLS(p.load(t, stranger).PeerClient())); err == nil {
		t.Error("a node of another CA was served as a peer")
	}

	client := p.clients.IssueClient(t, "acme")
	cfg := clientConfig(p.cluster, &client, t)
	cfg.ServerName, cfg.InsecureSkipVerify = PeerServerName, true
	if err := check(addr, credentials.NewTLS(cfg)); err == nil {
		t.Error("a client certificate was accepted on the peer server name")
	}

	good := p.clients.IssueClient(t, "acme")
	if err := check(addr, credentials.NewTLS(clientConfig(p.cluster, &good, t))); err != nil || lastPeer.Load() {
		t.Errorf("client call: err %v, marked peer %v; want success, not a peer", err, lastPeer.Load())
	}
}

// TestNoPeerNameWithoutPeerTLS: a node without a cluster CA (standalone)
// refuses the peer server name, so a client certificate can never pass as a
// peer there (IsPeer would otherwise see a verified chain on that name).
func TestNoPeerNameWithoutPeerTLS(t *testing.T) {
	p := newPKI(t)
	f := p.files
	f.PeerCA = ""
	var lastPeer atomic.Bool
	addr := serveHealth(t, p.load(t, f), &lastPeer)
	client := p.clients.IssueClient(t, "acme")
	cfg := clientConfig(p.cluster, &client, t)
	cfg.ServerName, cfg.InsecureSkipVerify = PeerServerName, true
	if err := check(addr, credentials.NewTLS(cfg)); err == nil || lastPeer.Load() {
		t.Fatalf("a client asking for %s on a node without peer TLS: err %v, marked peer %v; want refused",
			PeerServerName, err, lastPeer.Load())
	}
	if err := check(addr, credentials.NewTLS(clientConfig(p.cluster, &client, t))); err != nil {
		t.Fatalf("the same client on the API name: %v", err)
	}
}

// TestCertificateReload: a certificate replaced on disk is served from the
// next handshake on, without a restart; a broken replacement keeps the old.
func TestCertificateReload(t *testing.T) {
	p := newPKI(t)
	f := p.files
	f.ClientCA = ""
	addr := serveHealth(t, p.load(t, f), nil)
	serial := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.cluster.Pool(), ServerName: "node1", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	next := p.cluster.Issue(t, "node1", "127.0.0.1")
	touch := func(path string, data []byte, at time.Time) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Minute)
	touch(f.Cert, next.CertPEM, later) // the key is still the old one: a mismatch
	if got := serial(); got != before {
		t.Fatalf("a certificate without its key was loaded: serial %s, want %s", got, before)
	}
	touch(f.Key, next.KeyPEM, later)
	after := serial()
	if after == before {
		t.Fatalf("still serving serial %s after the files changed", before)
	}
	leaf, _ := x509.ParseCertificate(next.TLS(t).Certificate[0])
	if after != leaf.SerialNumber.String() {
		t.Errorf("serving serial %s, want the new %s", after, leaf.SerialNumber)
	}
}

// TestRefusedFiles: configurations that would fail on every connection, or
// let a client pass for a node, are refused when loading.
func TestRefusedFiles(t *testing.T) {
	p := newPKI(t)
	shared := p.files
	shared.ClientCA = shared.PeerCA
	serverOnly := p.files
	serverOnly.Cert, serverOnly.Key = p.cluster.IssueFor(t, "node1", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}).Write(t, p.dir, "server-only")
	foreign := p.files
	foreign.Cert, foreign.Key = p.stranger.Issue(t, "node1").Write(t, p.dir, "foreign")
	empty := p.files
	empty.PeerCA = testpki.WriteFile(t, p.dir, "empty.crt", []byte("no PEM here\n"))
	// A client's certificate as the API certificate: without peer TLS
	// (serve --dev in a shell with a client's IDEMNODE_TLS_CERT) and with.
	clientCert, clientKey := p.clients.IssueClient(t, "acme").Write(t, p.dir, "client-acme")
	clientOnly := NodeFiles{Cert: clientCert, Key: clientKey}
	clientAPI := p.files
	clientAPI.Cert, clientAPI.Key = clientCert, clientKey
	for _, tc := range []struct {
		name  string
		files NodeFiles
		want  string
	}{
		{"client CA is the cluster CA", shared, "client CA"},
		{"peer certificate without clientAuth", serverOnly, "serverAuth and clientAuth"},
		{"peer certificate of another CA", foreign, "not accepted by the cluster CA"},
		{"CA file without a certificate", empty, "no PEM certificate"},
		{"client certificate, no peer TLS", clientOnly, "API certificate " + clientCert + ": no serverAuth usage: its extended key usages are clientAuth"},
		{"client certificate as the API's", clientAPI, "no serverAuth usage"},
		{"no certificate", NodeFiles{PeerCA: p.files.PeerCA}, "certificate and its key are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadNode(tc.files, slog.Default())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestClientFiles(t *testing.T) {
	p := newPKI(t)
	if _, err := Client(ClientFiles{Cert: p.files.Cert}); err == nil {
		t.Error("a certificate without its key was accepted")
	}
	if _, err := Client(ClientFiles{CA: p.files.Cert + ".missing"}); err == nil {
		t.Error("a missing CA file was accepted")
	}
	c, err := Client(ClientFiles{CA: p.files.PeerCA, Cert: p.files.Cert, Key: p.files.Key, ServerName: "node1"})
	if err != nil || c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "node1" {
		t.Errorf("Client = %+v, %v", c, err)
	}
	if (ClientFiles{}).Enabled() || !(ClientFiles{ServerName: "x"}).Enabled() {
		t.Error("Enabled")
	}
}

// TestRefreshTakesInChangedFiles: Refresh reads a certificate replaced on
// disk without waiting for a handshake (the server's reload loop polls it),
// and leaves unchanged files alone.
func TestRefreshTakesInChangedFiles(t *testing.T) {
	p := newPKI(t)
	var logs bytes.Buffer
	n, err := LoadNode(p.files, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	if strings.Contains(logs.String(), "reloaded") {
		t.Fatalf("unchanged files were reloaded: %s", logs.String())
	}
	next := p.cluster.Issue(t, "node1", "127.0.0.1")
	later := time.Now().Add(time.Minute)
	for path, data := range map[string][]byte{p.files.Cert: next.CertPEM, p.files.Key: next.KeyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	n.Refresh()
	if !strings.Contains(logs.String(), "reloaded") {
		t.Fatalf("a changed certificate was not reloaded by Refresh: %s", logs.String())
	}
}
