package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testpki"
	"github.com/idemnode/idemnode/internal/testutil"
	idemserver "github.com/idemnode/idemnode/server"
)

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
	flags               idemserver.TLS
	clientFlags, noCert []string
	gossipA, gossipB    string
}

func newServePKI(t *testing.T) *servePKI {
	p := &servePKI{dir: t.TempDir(), cluster: testpki.NewCA(t, "cluster"), clients: testpki.NewCA(t, "clients")}
	p.flags.Cert, p.flags.Key = p.cluster.Issue(t, "node1", "127.0.0.1").Write(t, p.dir, "node1")
	p.flags.ClientCA = testpki.WriteFile(t, p.dir, "clients-ca.crt", p.clients.PEM)
	p.flags.PeerCA = testpki.WriteFile(t, p.dir, "cluster-ca.crt", p.cluster.PEM)
	p.gossipA = base64.StdEncoding.EncodeToString(testpki.GossipKey(t))
	p.gossipB = base64.StdEncoding.EncodeToString(testpki.GossipKey(t))
	p.flags.GossipKeyFile = testpki.WriteFile(t, p.dir, "gossip.keys", []byte(p.gossipA+"\n"))
	cert, key := p.clients.IssueClient(t, "cli").Write(t, p.dir, "cli")
	p.clientFlags = []string{"--tls-ca", p.flags.PeerCA, "--tls-cert", cert, "--tls-key", key}
	p.noCert = []string{"--tls-ca", p.flags.PeerCA}
	return p
}

func (p *servePKI) serveFlags() []string {
	f := p.flags
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-client-ca", f.ClientCA,
		"--peer-ca", f.PeerCA, "--gossip-key-file", f.GossipKeyFile}
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
		{"certificate of another CA", []string{"--tls-ca", p.flags.PeerCA, "--tls-cert", sc, "--tls-key", sk}, exitDenied,
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
	if err := os.WriteFile(p.flags.GossipKeyFile, []byte(p.gossipB+"\n"+p.gossipA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the gossip keys reloaded", func() bool {
		return strings.Contains(s.log(), `gossip keys reloaded" keys=2`)
	})
	s.cliJSON(0, &won, "claim", "--key", "k2", "--fingerprint", "bb")
}
