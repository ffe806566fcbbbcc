package testcluster

import (
	"crypto/tls"
	"log/slog"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testpki"
	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
)

// Security is the key material of a cluster run with TLS, generated in the
// test. Each node gets a certificate for its IP signed by CA, trusts CA as
// the cluster CA, and encrypts gossip with its keyring. A node with an
// Issuer of its own is a stranger: its certificate is signed by that CA and
// it trusts only that CA.
type Security struct {
	// CA is the cluster CA (--peer-ca of every node).
	CA *testpki.CA
	// ClientCA, when set, is required of clients (--tls-client-ca); the
	// clients of Node.Client present a certificate it signed.
	ClientCA *testpki.CA
	// GossipKeys is every node's keyring, primary first; empty: plaintext.
	GossipKeys [][]byte
}

// NewSecurity returns fresh material: a cluster CA, a client CA and one
// gossip key.
func NewSecurity(t testing.TB) *Security {
	return &Security{CA: testpki.NewCA(t, "cluster CA"), ClientCA: testpki.NewCA(t, "client CA"),
		GossipKeys: [][]byte{testpki.GossipKey(t)}}
}

// ClientTLS is the configuration of a test client: it trusts the cluster
// CA (which signs the nodes' certificates) and presents a certificate of
// the client CA, if there is one.
func (s *Security) ClientTLS(t testing.TB) *tls.Config {
	c := &tls.Config{RootCAs: s.CA.Pool(), MinVersion: tls.VersionTLS12}
	if s.ClientCA != nil {
		c.Certificates = []tls.Certificate{s.ClientCA.IssueClient(t, "test client").TLS(t)}
	}
	return c
}

// wiring is what start passes to the node, its gRPC server and its client.
type wiring struct {
	serverOpts  []grpc.ServerOption
	apiOpts     []rpc.Option
	clientCreds credentials.TransportCredentials
}

// secure writes nd's certificates into dir and wires TLS into cfg and w,
// as `serve` does from its flags.
func (s *Security) secure(t testing.TB, nd *Node, dir string, cfg *cluster.Config, w *wiring) error {
	issuer, keys := s.CA, s.GossipKeys
	if nd.Issuer != nil {
		issuer = nd.Issuer
	}
	if nd.GossipKeys != nil {
		keys = nd.GossipKeys
	}
	files := tlsconfig.NodeFiles{PeerCA: testpki.WriteFile(t, dir, "cluster-ca.crt", issuer.PEM)}
	files.Cert, files.Key = issuer.Issue(t, nd.ID, nd.IP).Write(t, dir, "node")
	if s.ClientCA != nil {
		files.ClientCA = testpki.WriteFile(t, dir, "client-ca.crt", s.ClientCA.PEM)
	}
	tn, err := tlsconfig.LoadNode(files, slog.Default())
	if err != nil {
		return err
	}
	cfg.PeerTLS = &cluster.PeerTLS{Server: tn.PeerServer(), Client: tn.PeerClient()}
	cfg.GossipKeys = keys
	w.serverOpts = append(w.serverOpts, grpc.Creds(credentials.NewTLS(tn.GRPCServer())))
	w.apiOpts = append(w.apiOpts, rpc.WithPeerCredentials(credentials.NewTLS(tn.PeerClient())))
	w.clientCreds = credentials.NewTLS(s.ClientTLS(t))
	return nil
}
