package server

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/internal/testpki"
)

// TestTLSFlagCheck: a server refuses plaintext it was not asked for, naming
// what is missing, and flag combinations that cannot work.
func TestTLSFlagCheck(t *testing.T) {
	secure := TLS{Cert: "c", Key: "k", PeerCA: "ca", GossipKey: "g"}
	for _, tc := range []struct {
		name      string
		f         TLS
		clustered bool
		dev       bool
		want      string // "" is accepted
	}{
		{"clustered, nothing", TLS{}, true, false,
			"refusing to serve in plaintext: missing --tls-cert and --tls-key, --peer-ca, --gossip-key or --gossip-key-file"},
		{"standalone, nothing", TLS{}, false, false, "missing --tls-cert and --tls-key (a standalone"},
		{"clustered, no gossip key", TLS{Cert: "c", Key: "k", PeerCA: "ca"}, true, false, "missing --gossip-key or --gossip-key-file"},
		{"clustered, secure", secure, true, false, ""},
		{"clustered, key file", TLS{Cert: "c", Key: "k", PeerCA: "ca", GossipKeyFile: "f"}, true, false, ""},
		{"standalone, TLS", TLS{Cert: "c", Key: "k", ClientCA: "cca"}, false, false, ""},
		{"--insecure", TLS{Insecure: true}, true, false, ""},
		{"--dev", TLS{}, true, true, ""},
		{"--insecure with gossip key only", TLS{Insecure: true, GossipKey: "g"}, true, false, ""},
		{"cert without key", TLS{Cert: "c", Insecure: true}, true, false, "--tls-cert and --tls-key go together"},
		{"client CA without cert", TLS{ClientCA: "x", Insecure: true}, false, false, "--tls-client-ca needs --tls-cert"},
		{"peer cert without key", TLS{Cert: "c", Key: "k", PeerCA: "ca", PeerCert: "p", GossipKey: "g"}, true, false, "--peer-cert and --peer-key go together"},
		{"peer cert without CA", TLS{Cert: "c", Key: "k", PeerCert: "p", PeerKey: "q", Insecure: true}, true, false, "--peer-cert needs --peer-ca"},
		{"peer CA without cert", TLS{PeerCA: "ca", Insecure: true}, true, false, "--peer-ca needs --tls-cert"},
		{"clustered TLS without peer CA", TLS{Cert: "c", Key: "k", Insecure: true}, true, false, "needs --peer-ca"},
		{"both gossip key flags", TLS{Cert: "c", Key: "k", PeerCA: "ca", GossipKey: "g", GossipKeyFile: "f"}, true, false, "not both"},
		{"gossip key on a standalone node", TLS{Cert: "c", Key: "k", GossipKey: "g"}, false, false, "for clustered nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.Insecure = f.Insecure || tc.dev // serve's --dev sets Insecure
			err := f.check(tc.clustered)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestInsecureWarns: with Insecure, a server logs a warning naming what
// runs in plaintext; fully secured, it logs none.
func TestInsecureWarns(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if _, err := loadSecurity(TLS{Insecure: true}, true, log); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"level=WARN", "INSECURE", "client gRPC", "Raft and forwarding between nodes", "gossip"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("warning %q lacks %q", buf.String(), want)
		}
	}
	buf.Reset()
	if _, err := loadSecurity(securedTLS(t), true, log); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "INSECURE") {
		t.Errorf("secured node warns: %s", buf.String())
	}
}

// securedTLS is the material of a fully secured clustered node: client
// TLS with client certificates, a cluster CA, a gossip key file.
func securedTLS(t *testing.T) TLS {
	dir := t.TempDir()
	ca, clients := testpki.NewCA(t, "cluster"), testpki.NewCA(t, "clients")
	var f TLS
	f.Cert, f.Key = ca.Issue(t, "node1", "127.0.0.1").Write(t, dir, "node1")
	f.ClientCA = testpki.WriteFile(t, dir, "clients-ca.crt", clients.PEM)
	f.PeerCA = testpki.WriteFile(t, dir, "cluster-ca.crt", ca.PEM)
	f.GossipKeyFile = testpki.WriteFile(t, dir, "gossip.keys", []byte(base64.StdEncoding.EncodeToString(testpki.GossipKey(t))+"\n"))
	return f
}
