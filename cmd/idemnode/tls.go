package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
)

// tlsFlags are serve's transport security: TLS for clients, mutual TLS
// between nodes, encrypted gossip. Serving any of it in plaintext takes
// --insecure (or --dev).
type tlsFlags struct {
	cert, key, clientCA       string
	peerCert, peerKey, peerCA string
	gossipKey, gossipKeyFile  string
	insecure                  bool
}

// gossipKeyPoll is how often the gossip key file is checked for a change
// (a Kubernetes Secret update reaches the mounted file within a minute or
// so); SIGHUP checks at once.
const gossipKeyPoll = 10 * time.Second

func (t *tlsFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&t.cert, "tls-cert", "", "PEM certificate (chain) of the gRPC port; re-read when the file changes")
	fl.StringVar(&t.key, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&t.clientCA, "tls-client-ca", "", "PEM CA bundle: clients must present a certificate it signed (mutual TLS)")
	fl.StringVar(&t.peerCA, "peer-ca", "", "PEM cluster CA: Raft and forwarding between nodes run over mutual TLS with certificates it signed")
	fl.StringVar(&t.peerCert, "peer-cert", "", "PEM certificate this node presents to other nodes (default: --tls-cert)")
	fl.StringVar(&t.peerKey, "peer-key", "", "PEM private key of --peer-cert (default: --tls-key)")
	fl.StringVar(&t.gossipKey, "gossip-key", "", "base64 key (16, 24 or 32 bytes) that encrypts gossip")
	fl.StringVar(&t.gossipKeyFile, "gossip-key-file", "",
		"file of base64 gossip keys, one per line: the first encrypts, all decrypt (rotation); re-read on change and SIGHUP")
	fl.BoolVar(&t.insecure, "insecure", false, "allow serving without TLS or gossip encryption (logged as a warning)")
}

// check refuses flag combinations that cannot work, and plaintext that
// was not asked for. A clustered node (one that gossips) needs all three
// of client TLS, peer TLS and a gossip key; a standalone one only the first.
func (t *tlsFlags) check(clustered, dev bool) error {
	switch {
	case (t.cert == "") != (t.key == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case t.clientCA != "" && t.cert == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	case (t.peerCert == "") != (t.peerKey == ""):
		return errors.New("--peer-cert and --peer-key go together")
	case t.peerCert != "" && t.peerCA == "":
		return errors.New("--peer-cert needs --peer-ca, the cluster CA that signed it")
	case t.peerCA != "" && t.cert == "":
		return errors.New("--peer-ca needs --tls-cert and --tls-key: forwarding between nodes runs over the gRPC port")
	case clustered && t.cert != "" && t.peerCA == "":
		return errors.New("--tls-cert on a clustered node needs --peer-ca: followers forward to the leader over the TLS gRPC port")
	case t.gossipKey != "" && t.gossipKeyFile != "":
		return errors.New("give --gossip-key or --gossip-key-file, not both")
	case !clustered && (t.gossipKey != "" || t.gossipKeyFile != "" || t.peerCA != ""):
		return errors.New("--gossip-key, --gossip-key-file and --peer-ca are for clustered nodes; this one has no --gossip-addr")
	}
	missing := t.missing(clustered)
	if len(missing) > 0 && !t.insecure && !dev {
		return fmt.Errorf("refusing to serve in plaintext: missing %s (a standalone node, --gossip-addr '', needs only --tls-cert and --tls-key); "+
			"pass --insecure to serve in plaintext anyway", strings.Join(missing, ", "))
	}
	return nil
}

// gap is traffic left in plaintext, and the flags that would secure it.
type gap struct{ traffic, flags string }

// gaps lists what runs in plaintext with these flags.
func (t *tlsFlags) gaps(clustered bool) []gap {
	var out []gap
	if t.cert == "" {
		out = append(out, gap{"client gRPC", "--tls-cert and --tls-key"})
	}
	if clustered && t.peerCA == "" {
		out = append(out, gap{"Raft and forwarding between nodes", "--peer-ca"})
	}
	if clustered && t.gossipKey == "" && t.gossipKeyFile == "" {
		out = append(out, gap{"gossip", "--gossip-key or --gossip-key-file"})
	}
	return out
}

// missing names the flags whose absence leaves traffic in plaintext.
func (t *tlsFlags) missing(clustered bool) []string {
	var out []string
	for _, g := range t.gaps(clustered) {
		out = append(out, g.flags)
	}
	return out
}

// security is what serve wires from tlsFlags.
type security struct {
	flags      tlsFlags
	node       *tlsconfig.Node // nil: the gRPC port is plaintext
	gossipKeys [][]byte        // nil: gossip is plaintext
	// gossipFile is the key file's content when last read.
	gossipFile []byte
}

// loadSecurity reads the files named by the flags and warns about what
// runs in plaintext. A file that cannot be used is a usage error.
func loadSecurity(t tlsFlags, clustered bool, log *slog.Logger) (*security, error) {
	s := &security{flags: t}
	if t.cert != "" {
		n, err := tlsconfig.LoadNode(tlsconfig.NodeFiles{Cert: t.cert, Key: t.key, ClientCA: t.clientCA,
			PeerCert: t.peerCert, PeerKey: t.peerKey, PeerCA: t.peerCA}, log)
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		s.node = n
	}
	switch {
	case t.gossipKey != "":
		keys, err := cluster.ParseGossipKeys(t.gossipKey)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key: %w", err)
		}
		s.gossipKeys = keys
	case t.gossipKeyFile != "":
		b, err := os.ReadFile(t.gossipKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key-file: %w", err)
		}
		if s.gossipKeys, err = cluster.ParseGossipKeys(string(b)); err != nil {
			return nil, fmt.Errorf("--gossip-key-file %s: %w", t.gossipKeyFile, err)
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

// watch applies changes until ctx ends: certificates reload by themselves
// on change, SIGHUP re-reads them at once; the gossip key file is polled
// and re-read on SIGHUP too, and its keys replace the node's keyring.
func (s *security) watch(ctx context.Context, node *cluster.Node, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(gossipKeyPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading certificates and gossip keys")
			if s.node != nil {
				if err := s.node.Reload(); err != nil {
					log.Warn("reload certificates", "err", err)
				}
			}
			s.reloadGossipKeys(node, log)
		case <-tick.C:
			s.reloadGossipKeys(node, log)
		}
	}
}

// reloadGossipKeys applies the key file if its content changed. A bad file
// keeps the keyring in use until the file changes again.
func (s *security) reloadGossipKeys(node *cluster.Node, log *slog.Logger) {
	if s.flags.gossipKeyFile == "" {
		return
	}
	b, err := os.ReadFile(s.flags.gossipKeyFile)
	if err != nil || bytes.Equal(b, s.gossipFile) {
		if err != nil {
			log.Warn("read gossip key file; keeping the keys in use", "file", s.flags.gossipKeyFile, "err", err)
		}
		return
	}
	s.gossipFile = b // reported once, not on every poll, if unusable
	keys, err := cluster.ParseGossipKeys(string(b))
	if err == nil {
		err = node.SetGossipKeys(keys)
	}
	if err != nil {
		log.Warn("gossip key file changed but cannot be used; keeping the keys in use", "file", s.flags.gossipKeyFile, "err", err)
		return
	}
	log.Info("gossip keys reloaded", "keys", len(keys))
}
