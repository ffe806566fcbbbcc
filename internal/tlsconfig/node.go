// Package tlsconfig builds the TLS configurations of an idemnode server and
// of its clients from PEM files. The server's files are re-read when they
// change, so certificates and CA bundles rotate without a restart.
//
// A server has two identities on its gRPC port: the API certificate that
// clients verify, and the peer certificate, signed by the cluster CA, that
// other nodes verify when they forward requests. A node dialling a peer
// sends PeerServerName as its TLS server name (SNI); the server answers it
// with the peer certificate and requires a client certificate signed by the
// cluster CA. Every other connection is a client's: the API certificate,
// and a client certificate signed by the client CA when one is configured.
// The Raft port speaks only the peer protocol.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"
)

// PeerServerName is the TLS server name a node sends when it dials another
// node. It is not a DNS name: peers are verified against the cluster CA,
// not by host name, because their addresses are pod IPs assigned at start.
const PeerServerName = "idemnode-peer"

// ErrNoServerAuth is a certificate given to serve whose extended key
// usages are listed and leave out serverAuth: a client's certificate.
// Every client would refuse it in the handshake, so a node refuses it at
// start (and a reload to it keeps the previous certificate).
var ErrNoServerAuth = errors.New("no serverAuth usage")

// NodeFiles names a server's PEM files. Empty names are features off.
type NodeFiles struct {
	// Cert and Key are the gRPC API's certificate chain and private key.
	Cert, Key string
	// ClientCA, when set, makes clients present a certificate it signed.
	ClientCA string
	// PeerCert and PeerKey are what the node presents to other nodes
	// (default Cert and Key); PeerCA is the cluster CA that signed every
	// node's peer certificate. PeerCA empty: node-to-node traffic is plain.
	PeerCert, PeerKey string
	PeerCA            string
}

// Node holds a server's certificates and CA pools, reloading them as their
// files change.
type Node struct {
	api      *reloading[*tls.Certificate]
	peer     *reloading[*tls.Certificate]
	clientCA *reloading[*caPool]
	peerCA   *reloading[*caPool]
}

// LoadNode reads every file named in f. f must name the API certificate
// (peer TLS runs over the gRPC port too); the caller checks the flags.
func LoadNode(f NodeFiles, log *slog.Logger) (*Node, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("a certificate and its key are required")
	}
	if f.PeerCert == "" {
		f.PeerCert, f.PeerKey = f.Cert, f.Key
	}
	n := &Node{}
	var err error
	if n.api, err = loadKeyPair("API certificate", log, f.Cert, f.Key); err != nil {
		return nil, err
	}
	if f.ClientCA != "" {
		if n.clientCA, err = loadPool("client CA", log, f.ClientCA); err != nil {
			return nil, err
		}
	}
	if f.PeerCA == "" {
		return n, nil
	}
	if n.peer, err = loadKeyPair("peer certificate", log, f.PeerCert, f.PeerKey); err != nil {
		return nil, err
	}
	if n.peerCA, err = loadPool("cluster CA", log, f.PeerCA); err != nil {
		return nil, err
	}
	if f.ClientCA != "" {
		if err := CheckSeparateCAs(f.ClientCA, f.PeerCA); err != nil {
			return nil, err
		}
	}
	if err := verifyPeer(n.peer.get(), n.peerCA.get().pool, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, fmt.Errorf("peer certificate %s: %w", f.PeerCert, err)
	}
	return n, nil
}

// PeerTLS reports whether node-to-node traffic is mutual TLS.
func (n *Node) PeerTLS() bool { return n.peerCA != nil }

// GRPCServer is the configuration of the gRPC port: the API certificate
// for clients, the peer certificate and mutual TLS for PeerServerName.
func (n *Node) GRPCServer() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if hello.ServerName == PeerServerName {
				if n.peerCA == nil {
					// Served the client config, a client certificate would
					// pass IsPeer (verified chain, peer server name): refuse.
					return nil, fmt.Errorf("this node has no peer TLS (--peer-ca); %s is not served", PeerServerName)
				}
				return n.peerServer([]string{"h2"}), nil
			}
			return n.apiServer(), nil
		},
	}
}

// JSONServer is the configuration of the JSON API's port: the API
// certificate and client CA of the gRPC port, over HTTP/2 or HTTP/1.1.
// Nodes never call it, so PeerServerName, which on the gRPC port selects
// the cluster CA's mutual TLS, is refused here: served the client config,
// a client certificate would pass IsPeer.
func (n *Node) JSONServer() *tls.Config {
	protos := []string{"h2", "http/1.1"}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if hello.ServerName == PeerServerName {
				return nil, fmt.Errorf("%s is not served on the JSON API's port", PeerServerName)
			}
			c := n.apiServer()
			c.NextProtos = protos
			return c, nil
		},
	}
}

func (n *Node) apiServer() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}, GetCertificate: current(n.api)}
	if n.clientCA != nil {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, n.clientCA.get().pool
	}
	return c
}

func (n *Node) peerServer(protos []string) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: protos, GetCertificate: current(n.peer),
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: n.peerCA.get().pool}
}

// PeerServer is the configuration of the Raft listener: mutual TLS with
// the cluster CA. Nil without peer TLS.
func (n *Node) PeerServer() *tls.Config {
	if n.peerCA == nil {
		return nil
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return n.peerServer(nil), nil },
	}
}

// PeerClient is the configuration of connections to other nodes (Raft and
// forwarding): it presents the peer certificate and accepts a server only
// with a certificate signed by the cluster CA. Nil without peer TLS.
func (n *Node) PeerClient() *tls.Config {
	if n.peerCA == nil {
		return nil
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: PeerServerName,
		// The chain is verified below against the cluster CA; host names
		// are not, since PeerServerName is no host's name (see there).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("peer presented no certificate")
			}
			opts := x509.VerifyOptions{Roots: n.peerCA.get().pool, Intermediates: x509.NewCertPool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("peer certificate not signed by the cluster CA: %w", err)
			}
			return nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return n.peer.get(), nil },
	}
}

// IsPeer reports whether a connection to the gRPC port came from another
// node: it asked for PeerServerName, which requires a certificate signed
// by the cluster CA, and presented one that verified.
func IsPeer(cs tls.ConnectionState) bool {
	return cs.ServerName == PeerServerName && len(cs.VerifiedChains) > 0
}

// Reload re-reads every file now (on SIGHUP), whether or not it changed,
// and reports what failed; what failed keeps its previous contents.
func (n *Node) Reload() error {
	var errs []error
	errs = append(errs, n.api.reload())
	if n.clientCA != nil {
		errs = append(errs, n.clientCA.reload())
	}
	if n.peerCA != nil {
		errs = append(errs, n.peer.reload(), n.peerCA.reload())
	}
	return errors.Join(errs...)
}

// Refresh re-reads the files that changed since they were last read, as
// the next handshake would: the server's reload loop polls it, so a
// rotation is taken in (and logged, or a bad file reported) when it lands
// rather than at the next connection.
func (n *Node) Refresh() {
	n.api.get()
	if n.peer != nil {
		n.peer.get()
	}
	if n.clientCA != nil {
		n.clientCA.get()
	}
	if n.peerCA != nil {
		n.peerCA.get()
	}
}

func current(r *reloading[*tls.Certificate]) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.get(), nil }
}

// loadKeyPair reads a certificate this node serves with, and its key.
func loadKeyPair(what string, log *slog.Logger, certFile, keyFile string) (*reloading[*tls.Certificate], error) {
	return newReloading(what, log, func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load %s %s and key %s: %w", what, certFile, keyFile, err)
		}
		if err := checkServing(c.Leaf); err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, certFile, err)
		}
		return &c, nil
	}, certFile, keyFile)
}

// checkServing refuses a certificate whose extended key usages are listed
// without serverAuth (or any): no client would accept it from a server.
// No list at all allows every usage.
func checkServing(leaf *x509.Certificate) error {
	if len(leaf.ExtKeyUsage) == 0 || slices.ContainsFunc(leaf.ExtKeyUsage, func(u x509.ExtKeyUsage) bool {
		return u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny
	}) {
		return nil
	}
	var names []string
	for _, u := range leaf.ExtKeyUsage {
		names = append(names, usageName(u))
	}
	return fmt.Errorf("%w: its extended key usages are %s and clients accept a server's certificate only with serverAuth "+
		"(a client certificate such as `idemnode tls client` makes; a node's comes from `idemnode tls node`)",
		ErrNoServerAuth, strings.Join(names, ", "))
}

// usageName is an extended key usage as openssl and RFC 5280 call it.
func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	case x509.ExtKeyUsageCodeSigning:
		return "codeSigning"
	case x509.ExtKeyUsageEmailProtection:
		return "emailProtection"
	case x509.ExtKeyUsageTimeStamping:
		return "timeStamping"
	case x509.ExtKeyUsageOCSPSigning:
		return "OCSPSigning"
	}
	return fmt.Sprintf("usage %d", u)
}

// caPool is a CA file's certificates, and the earliest time one expires.
type caPool struct {
	pool     *x509.CertPool
	notAfter time.Time
}

func loadPool(what string, log *slog.Logger, file string) (*reloading[*caPool], error) {
	return newReloading(what, log, func() (*caPool, error) {
		certs, err := ReadCerts(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		p := &caPool{pool: x509.NewCertPool()}
		for _, c := range certs {
			p.pool.AddCert(c)
			p.notAfter = earliest(p.notAfter, c.NotAfter)
		}
		return p, nil
	}, file)
}

// ReadCerts parses every certificate of a PEM bundle; a file without one is
// an error (an empty pool would refuse everyone, silently). Exported for
// `idemnode tls`, which reads its CA files as a node would.
func ReadCerts(file string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for rest := b; ; {
		var der []byte
		der, rest = nextCertificate(rest)
		if der == nil {
			break
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return certs, nil
}

// CheckSeparateCAs refuses a client CA that the cluster CA vouches for: any
// certificate the client CA signs would then also be a valid node
// certificate, and a client could speak Raft. LoadNode runs it at start;
// it is exported so that `idemnode tls` refuses to issue what a node would
// refuse, by this same rule.
func CheckSeparateCAs(clientCA, peerCA string) error {
	clients, err := ReadCerts(clientCA)
	if err != nil {
		return err
	}
	peers, err := ReadCerts(peerCA)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	for _, c := range peers {
		pool.AddCert(c)
	}
	for _, c := range clients {
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
			return fmt.Errorf("the client CA %q (%s) is the cluster CA or signed by it: "+
				"every client certificate would pass as a node's; issue client certificates from a CA of their own",
				c.Subject.CommonName, clientCA)
		}
	}
	return nil
}

// verifyPeer checks at startup that our own peer certificate is one the
// other nodes accept: signed by the cluster CA, usable both to serve and to
// dial (an ExtKeyUsage list without serverAuth and clientAuth fails later,
// on every connection, with a less helpful message).
func verifyPeer(cert *tls.Certificate, pool *x509.CertPool, usages ...x509.ExtKeyUsage) error {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return err
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, u := range usages {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			return fmt.Errorf("not accepted by the cluster CA (a node certificate needs serverAuth and clientAuth usages): %w", err)
		}
	}
	return nil
}
