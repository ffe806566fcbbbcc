package testcluster

import (
	"crypto/tls"
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/idemnode/idemnode/internal/testpki"
	"github.com/idemnode/idemnode/server"
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

// secure writes nd's certificates into dir and puts them, with the
// gossip keyring, into cfg as serve's TLS flags would; it returns the
// credentials of the node's test client.
func (s *Security) secure(t testing.TB, nd *Node, dir string, cfg *server.Config) (credentials.TransportCredentials, error) {
	issuer, keys := s.CA, s.GossipKeys
	if nd.Issuer != nil {
		issuer = nd.Issuer
	}
	if nd.GossipKeys != nil {
		keys = nd.GossipKeys
	}
	tls := &cfg.TLS
	tls.PeerCA = testpki.WriteFile(t, dir, "cluster-ca.crt", issuer.PEM)
	tls.Cert, tls.Key = issuer.Issue(t, nd.ID, nd.IP).Write(t, dir, "node")
	if s.ClientCA != nil {
		tls.ClientCA = testpki.WriteFile(t, dir, "client-ca.crt", s.ClientCA.PEM)
	}
	var ring []string
	for _, k := range keys {
		ring = append(ring, base64.StdEncoding.EncodeToString(k))
	}
	tls.GossipKey = strings.Join(ring, "\n") // none: plaintext gossip
	return credentials.NewTLS(s.ClientTLS(t)), nil
}
