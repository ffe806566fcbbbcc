package main

import (
	"github.com/spf13/pflag"

	idemserver "github.com/idemnode/idemnode/server"
)

// registerTLS adds serve's transport security flags: TLS for clients,
// mutual TLS between nodes, encrypted gossip (server.TLS). Serving any of
// it in plaintext takes --insecure (or --dev).
func registerTLS(fl *pflag.FlagSet, t *idemserver.TLS) {
	fl.StringVar(&t.Cert, "tls-cert", "", "PEM certificate (chain) of the gRPC port; re-read when the file changes")
	fl.StringVar(&t.Key, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&t.ClientCA, "tls-client-ca", "", "PEM CA bundle: clients must present a certificate it signed (mutual TLS)")
	fl.StringVar(&t.PeerCA, "peer-ca", "", "PEM cluster CA: Raft and forwarding between nodes run over mutual TLS with certificates it signed")
	fl.StringVar(&t.PeerCert, "peer-cert", "", "PEM certificate this node presents to other nodes (default: --tls-cert)")
	fl.StringVar(&t.PeerKey, "peer-key", "", "PEM private key of --peer-cert (default: --tls-key)")
	fl.StringVar(&t.GossipKey, "gossip-key", "", "base64 key (16, 24 or 32 bytes) that encrypts gossip")
	fl.StringVar(&t.GossipKeyFile, "gossip-key-file", "",
		"file of base64 gossip keys, one per line: the first encrypts, all decrypt (rotation); re-read on change and SIGHUP")
	fl.BoolVar(&t.Insecure, "insecure", false, "allow serving without TLS or gossip encryption (logged as a warning)")
}
