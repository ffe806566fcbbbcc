package main

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testpki"
	"github.com/idemnode/idemnode/internal/testutil"
)

// TestTLSFlagCheck: serve refuses plaintext it was not asked for, naming
// what is missing, and flag combinations that cannot work.
func TestTLSFlagCheck(t *testing.T) {
	secure := tlsFlags{cert: "c", key: "k", peerCA: "ca", gossipKey: "g"}
	for _, tc := range []struct {
		name      string
		f         tlsFlags
		clustered bool
		dev       bool
		want      string // "" is accepted
	}{
		{"clustered, nothing", tlsFlags{}, true, false,
			"refusing to serve in plaintext: missing --tls-cert and --tls-key, --peer-ca, --gossip-key or --gossip-key-file"},
		{"standalone, nothing", tlsFlags{}, false, false, "missing --tls-cert and --tls-key (a standalone"},
		{"clustered, no gossip key", tlsFlags{cert: "c", key: "k", peerCA: "ca"}, true, false, "missing --gossip-key or --gossip-key-file"},
		{"clustered, secure", secure, true, false, ""},
		{"clustered, key file", tlsFlags{cert: "c", key: "k", peerCA: "ca", gossipKeyFile: "f"}, true, false, ""},
		{"standalone, TLS", tlsFlags{cert: "c", key: "k", clientCA: "cca"}, false, false, ""},
		{"--insecure", tlsFlags{insecure: true}, true, false, ""},
		{"--dev", tlsFlags{}, true, true, ""},
		{"--insecure with gossip key only", tlsFlags{insecure: true, gossipKey: "g"}, true, false, ""},
		{"cert without key", tlsFlags{cert: "c", insecure: true}, true, false, "--tls-cert and --tls-key go together"},
		{"client CA without cert", tlsFlags{clientCA: "x", insecure: true}, false, false, "--tls-client-ca needs --tls-cert"},
		{"peer cert without key", tlsFlags{cert: "c", key: "k", peerCA: "ca", peerCert: "p", gossipKey: "g"}, true, false, "--peer-cert and --peer-key go together"},
		{"peer cert without CA", tlsFlags{cert: "c", key: "k", peerCert: "p", peerKey: "q", insecure: true}, true, false, "--peer-cert needs --peer-ca"},
		{"peer CA without cert", tlsFlags{peerCA: "ca", insecure: true}, true, false, "--peer-ca needs --tls-cert"},
		{"clustered TLS without peer CA", tlsFlags{cert: "c", key: "k", insecure: true}, true, false, "needs --peer-ca"},
		{"both gossip key flags", tlsFlags{cert: "c", key: "k", peerCA: "ca", gossipKey: "g", gossipKeyFile: "f"}, true, false, "not both"},
		{"gossip key on a standalone node", tlsFlags{cert: "c", key: "k", gossipKey: "g"}, false, false, "for clustered nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.check(tc.clustered, tc.dev)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestInsecureWarns: with --insecure, serve logs a warning naming what
// runs in plaintext; fully secured, it logs none.
func TestInsecureWarns(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if _, err := loadSecurity(tlsFlags{insecure: true}, true, log); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"level=WARN", "INSECURE", "client gRPC", "Raft and forwarding between nodes", "gossip"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("warning %q lacks %q", buf.String(), want)
		}
	}
	buf.Reset()
	p := newServePKI(t)
	if _, err := loadSecurity(p.flags, true, log); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "INSECURE") {
		t.Errorf("secured node warns: %s", buf.String())
	}
}

// TestServeRefusesPlaintextExitCode: the refusal is a usage error, exit 2.
func TestServeRefusesPlaintextExitCode(t *testing.T) {
	t.Parallel()
	_, stderr, code := cli(t, "serve", "--node-id", "n1", "--data-dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "refusing to serve in plaintext") || !strings.Contains(stderr, "--insecure") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming the missing flags and --insecure", code, stderr)
	}
	_, stderr, code = cli(t, "serve", "--node-id", "n1", "--data-dir", t.TempDir(), "--tls-cert", "/nonexistent.crt", "--tls-key", "/nonexistent.key",
		"--peer-ca", "/nonexistent-ca.crt", "--gossip-key", base64.StdEncoding.EncodeToString(make([]byte, 32)))
	if code != 2 || !strings.Contains(stderr, "nonexistent") {
		t.Errorf("missing files: exit %d, stderr %q; want exit 2 naming the file", code, stderr)
	}
}

// servePKI is the material of a TLS server process and its clients.
type servePKI struct {
	dir                 string
	cluster, clients    *testpki.CA
	flags               tlsFlags
	clientFlags, noCert []string
	gossipA, gossipB    string
}

func newServePKI(t *testing.T) *servePKI {
	p := &servePKI{dir: t.TempDir(), cluster: testpki.NewCA(t, "cluster"), clients: testpki.NewCA(t, "clients")}
	p.flags.cert, p.flags.key = p.cluster.Issue(t, "node1", "127.0.0.1").Write(t, p.dir, "node1")
	p.flags.clientCA = testpki.WriteFile(t, p.dir, "clients-ca.crt", p.clients.PEM)
	p.flags.peerCA = testpki.WriteFile(t, p.dir, "cluster-ca.crt", p.cluster.PEM)
	p.gossipA = base64.StdEncoding.EncodeToString(testpki.GossipKey(t))
	p.gossipB = base64.StdEncoding.EncodeToString(testpki.GossipKey(t))
	p.flags.gossipKeyFile = testpki.WriteFile(t, p.dir, "gossip.keys", []byte(p.gossipA+"\n"))
	cert, key := p.clients.IssueClient(t, "cli").Write(t, p.dir, "cli")
	p.clientFlags = []string{"--tls-ca", p.flags.peerCA, "--tls-cert", cert, "--tls-key", key}
	p.noCert = []string{"--tls-ca", p.flags.peerCA}
	return p
}

func (p *servePKI) serveFlags() []string {
	f := p.flags
	return []string{"--tls-cert", f.cert, "--tls-key", f.key, "--tls-client-ca", f.clientCA,
		"--peer-ca", f.peerCA, "--gossip-key-file", f.gossipKeyFile}
}

// TestServeOverTLS runs a node with every TLS flag: the CLI with a client
// certificate works (claim, snapshot save), without one, with a stranger's
// or in plaintext it is refused, and a new gossip key file is applied on
// SIGHUP.
func TestServeOverTLS(t *testing.T) {
	t.Parallel()
	p := newServePKI(t)
	s := mustServerWith(t, p.serveFlags(), p.clientFlags)

	var won claimJSON
	s.cliJSON(0, &won, "claim", "--key", "k1", "--fingerprint", "aa")
	if won.Outcome != "won" {
		t.Fatalf("claim over TLS: %+v", won)
	}
	var saved backupJSON
	s.cliJSON(0, &saved, "snapshot", "save", filepath.Join(t.TempDir(), "b.snap"))

	stranger := testpki.NewCA(t, "stranger")
	sc, sk := stranger.IssueClient(t, "mallory").Write(t, p.dir, "mallory")
	for _, tc := range []struct {
		name   string
		flags  []string
		code   int
		stderr string
	}{
		{"no client certificate", p.noCert, exitDenied, "idemnode: the server requires a client certificate (--tls-cert, --tls-key)\n"},
		{"certificate of another CA", []string{"--tls-ca", p.flags.peerCA, "--tls-cert", sc, "--tls-key", sk}, exitDenied,
			"idemnode: the server at " + s.grpc + " refused the client certificate of --tls-cert (tls: certificate required): is it signed by a CA the server trusts?\n"},
		{"server not trusted", []string{"--tls-ca", sc, "--tls-cert", sc, "--tls-key", sk}, exitUsage,
			"idemnode: cannot verify the certificate of " + s.grpc + ": x509: "},
		{"plaintext", nil, exitRetry, "idemnode: " + s.grpc + " closed the connection before answering: is it a TLS server (--tls-ca)?\n"},
	} {
		args := append([]string{"status", "--addr", s.grpc, "--timeout", "3s"}, tc.flags...)
		if _, stderr, code := cli(t, args...); code != tc.code || !strings.HasPrefix(stderr, tc.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", tc.name, code, stderr, tc.code, tc.stderr)
		}
	}
	if strings.Contains(s.log(), "INSECURE") {
		t.Errorf("a fully secured node warns about plaintext:\n%s", s.log())
	}

	// Rotation round 2: B primary, A still accepted.
	if err := os.WriteFile(p.flags.gossipKeyFile, []byte(p.gossipB+"\n"+p.gossipA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the gossip keys reloaded", func() bool {
		return strings.Contains(s.log(), `gossip keys reloaded" keys=2`)
	})
	s.cliJSON(0, &won, "claim", "--key", "k2", "--fingerprint", "bb")
}
