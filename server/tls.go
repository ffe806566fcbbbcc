package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
)

// TLS is a server's transport security: TLS for clients, mutual TLS
// between nodes, encrypted gossip. Serving any of it in plaintext takes
// Insecure (serve's --insecure or --dev).
type TLS struct {
	// Cert and Key are the gRPC port's PEM certificate (chain) and key,
	// re-read when the files change; ClientCA, when set, is required of
	// clients (mutual TLS).
	Cert, Key, ClientCA string
	// PeerCA is the cluster CA: Raft and forwarding between nodes run over
	// mutual TLS with certificates it signed. PeerCert and PeerKey are what
	// this node presents to the others (default: Cert and Key).
	PeerCert, PeerKey, PeerCA string
	// GossipKey is a keyring of base64 keys, one per line, that encrypts
	// gossip; GossipKeyFile is a file of them, re-read on change and on
	// Reload. The first key encrypts, all decrypt (rotation).
	GossipKey, GossipKeyFile string
	// Insecure allows traffic in plaintext (logged as a warning).
	Insecure bool
}

// check refuses combinations that cannot work, and plaintext that was not
// asked for. A clustered node (one that gossips) needs all three of client
// TLS, peer TLS and a gossip key; a standalone one only the first.
func (t *TLS) check(clustered bool) error {
	switch {
	case (t.Cert == "") != (t.Key == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case t.ClientCA != "" && t.Cert == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	case (t.PeerCert == "") != (t.PeerKey == ""):
		return errors.New("--peer-cert and --peer-key go together")
	case t.PeerCert != "" && t.PeerCA == "":
		return errors.New("--peer-cert needs --peer-ca, the cluster CA that signed it")
	case t.PeerCA != "" && t.Cert == "":
		return errors.New("--peer-ca needs --tls-cert and --tls-key: forwarding between nodes runs over the gRPC port")
	case clustered && t.Cert != "" && t.PeerCA == "":
		return errors.New("--tls-cert on a clustered node needs --peer-ca: followers forward to the leader over the TLS gRPC port")
	case t.GossipKey != "" && t.GossipKeyFile != "":
		return errors.New("give --gossip-key or --gossip-key-file, not both")
	case !clustered && (t.GossipKey != "" || t.GossipKeyFile != "" || t.PeerCA != ""):
		return errors.New("--gossip-key, --gossip-key-file and --peer-ca are for clustered nodes; this one has no --gossip-addr")
	}
	missing := t.missing(clustered)
	if len(missing) > 0 && !t.Insecure {
		return fmt.Errorf("refusing to serve in plaintext: missing %s (a standalone node, --gossip-addr '', needs only --tls-cert and --tls-key); "+
			"pass --insecure to serve in plaintext anyway", strings.Join(missing, ", "))
	}
	return nil
}

// gap is traffic left in plaintext, and the flags that would secure it.
type gap struct{ traffic, flags string }

// gaps lists what runs in plaintext with these settings.
func (t *TLS) gaps(clustered bool) []gap {
	var out []gap
	if t.Cert == "" {
		out = append(out, gap{"client gRPC", "--tls-cert and --tls-key"})
	}
	if clustered && t.PeerCA == "" {
		out = append(out, gap{"Raft and forwarding between nodes", "--peer-ca"})
	}
	if clustered && t.GossipKey == "" && t.GossipKeyFile == "" {
		out = append(out, gap{"gossip", "--gossip-key or --gossip-key-file"})
	}
	return out
}

// missing names the flags whose absence leaves traffic in plaintext.
func (t *TLS) missing(clustered bool) []string {
	var out []string
	for _, g := range t.gaps(clustered) {
		out = append(out, g.flags)
	}
	return out
}

// security is what Start wires from TLS.
type security struct {
	files      TLS
	node       *tlsconfig.Node // nil: the gRPC port is plaintext
	gossipKeys [][]byte        // nil: gossip is plaintext
	// gossipFile is the key file's content as read at start.
	gossipFile []byte
}

// loadSecurity reads the files named by t and warns about what runs in
// plaintext. A file that cannot be used is a configuration error.
func loadSecurity(t TLS, clustered bool, log *slog.Logger) (*security, error) {
	s := &security{files: t}
	if t.Cert != "" {
		n, err := tlsconfig.LoadNode(tlsconfig.NodeFiles{Cert: t.Cert, Key: t.Key, ClientCA: t.ClientCA,
			PeerCert: t.PeerCert, PeerKey: t.PeerKey, PeerCA: t.PeerCA}, log)
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		s.node = n
	}
	switch {
	case t.GossipKey != "":
		keys, err := cluster.ParseGossipKeys(t.GossipKey)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key: %w", err)
		}
		s.gossipKeys = keys
	case t.GossipKeyFile != "":
		b, err := os.ReadFile(t.GossipKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key-file: %w", err)
		}
		if s.gossipKeys, err = cluster.ParseGossipKeys(string(b)); err != nil {
			return nil, fmt.Errorf("--gossip-key-file %s: %w", t.GossipKeyFile, err)
		}
		s.gossipFile = b
	}
	if gaps := t.gaps(clustered); len(gaps) > 0 {
		var traffic []string
		for _, g := range gaps {
			traffic = append(traffic, g.traffic)
		}
		log.Warn("INSECURE: serving traffic in plaintext; anyone on the network can read and forge it",
			"plaintext", strings.Join(traffic, ", "), "missing", strings.Join(t.missing(clustered), ", "))
	}
	return s, nil
}

// peerTLS is the Raft transport's TLS, nil without peer TLS.
func (s *security) peerTLS() *cluster.PeerTLS {
	if s.node == nil || !s.node.PeerTLS() {
		return nil
	}
	return &cluster.PeerTLS{Server: s.node.PeerServer(), Client: s.node.PeerClient()}
}

// serverOptions put TLS on the gRPC port.
func (s *security) serverOptions() []grpc.ServerOption {
	if s.node == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(s.node.GRPCServer()))}
}

// jsonTLS is the JSON API port's TLS, nil when the gRPC port is plaintext.
func (s *security) jsonTLS() *tls.Config {
	if s.node == nil {
		return nil
	}
	return s.node.JSONServer()
}

// rpcOptions secure forwarding to the leader with the peer certificate.
func (s *security) rpcOptions(auth bool) []rpc.Option {
	if s.node == nil || !s.node.PeerTLS() {
		if auth {
			// Nodes cannot prove to each other that they are peers, so
			// each forwarded call carries its caller's token instead.
			return []rpc.Option{rpc.WithUnaryForwarding()}
		}
		return nil
	}
	return []rpc.Option{rpc.WithPeerCredentials(credentials.NewTLS(s.node.PeerClient()))}
}
