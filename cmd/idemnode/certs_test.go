package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpTLSCommands: the certificate commands' --help has an example,
// and tls's lists the files they write.
func TestHelpTLSCommands(t *testing.T) {
	t.Parallel()
	for _, sub := range [][]string{{"tls"}, {"tls", "ca"}, {"tls", "node"}, {"tls", "client"}, {"keygen"}} {
		stdout, _, code := cli(t, append(sub, "--help")...)
		if want := "Examples:\n  idemnode " + strings.Join(sub, " "); code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("idemnode %s --help (exit %d) has no %q:\n%s", strings.Join(sub, " "), code, want, stdout)
		}
	}
	stdout, _, _ := cli(t, "tls", "--help")
	for _, file := range []string{"cluster-ca.crt", "client-ca.crt", "<name>.crt", "client-<tenant>.crt", "gossip.keys"} {
		if !strings.Contains(stdout, file) {
			t.Errorf("tls --help does not name %s:\n%s", file, stdout)
		}
	}
}

// mustCerts runs `idemnode` with args and --dir dir and requires exit 0.
func mustCerts(t *testing.T, dir string, args ...string) string {
	t.Helper()
	stdout, stderr, code := cli(t, append(args, "--dir", dir)...)
	if code != exitOK {
		t.Fatalf("idemnode %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

// TestTLSCommandsCluster: a three-node cluster with mutual TLS between
// nodes and with clients, encrypted gossip and --auth, from nothing but the
// files of `idemnode tls` and `idemnode keygen` (the recipe of
// docs/SECURITY.md). A client certificate for tenant acme claims through
// every node (followers forward over the peer TLS) and may not name another
// tenant; a plaintext client and a certificate of another CA are refused.
// The commands refuse to replace a file without --force.
func TestTLSCommandsCluster(t *testing.T) {
	t.Parallel()
	pki := t.TempDir()
	file := func(name string) string { return filepath.Join(pki, name) }
	mustCerts(t, pki, "tls", "ca", "--kind", "cluster")
	mustCerts(t, pki, "tls", "ca", "--kind", "client")
	if out := mustCerts(t, pki, "keygen"); out != "wrote "+file("gossip.keys")+"\n" {
		t.Errorf("keygen printed %q", out)
	}
	nodes := make([]*server, 3)
	for i := range nodes {
		nodes[i] = newServer(t, nil, nil)
		nodes[i].nodeID = fmt.Sprintf("n%d", i+1)
		host, _, err := net.SplitHostPort(nodes[i].grpc)
		if err != nil {
			t.Fatal(err)
		}
		mustCerts(t, pki, "tls", "node", "--name", nodes[i].nodeID, "--ip", host, "--dns", "localhost")
	}
	out := mustCerts(t, pki, "tls", "client", "--tenant", "acme")
	if want := "wrote " + file("client-acme.crt") + "\nwrote " + file("client-acme.key") + "\n"; out != want {
		t.Errorf("tls client printed %q, want %q", out, want)
	}
	for _, key := range []string{"cluster-ca.key", "client-ca.key", "n1.key", "client-acme.key", "gossip.keys"} {
		if fi, err := os.Stat(file(key)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", key, err, fi.Mode().Perm())
		}
	}

	acme := []string{"--tls-ca", file("cluster-ca.crt"), "--tls-cert", file("client-acme.crt"), "--tls-key", file("client-acme.key")}
	for i, n := range nodes {
		n.serveFlags = append(clusterFlags(nodes, i),
			"--tls-cert", file(n.nodeID+".crt"), "--tls-key", file(n.nodeID+".key"), "--peer-ca", file("cluster-ca.crt"),
			"--tls-client-ca", file("client-ca.crt"), "--gossip-key-file", file("gossip.keys"), "--auth")
		n.clientFlags = acme
		n.launch()
	}
	for _, n := range nodes {
		n.waitReady()
		// No --insecure: a node that started serves nothing in plaintext
		// (it would name the gap in a warning).
		if strings.Contains(n.log(), "INSECURE") {
			t.Errorf("%s serves something in plaintext:\n%s", n.nodeID, n.log())
		}
	}

	for i, n := range nodes {
		var won claimJSON
		n.cliJSON(exitOK, &won, "claim", "--key", fmt.Sprintf("order-%d", i), "--fingerprint", "c0ffee")
		if won.Outcome != "won" {
			t.Errorf("claim through %s: %+v, want won", n.nodeID, won)
		}
	}
	var got recordJSON
	nodes[1].cliJSON(exitOK, &got, "get", "--tenant", "acme", "--key", "order-0")
	if got.Outcome != "ok" || got.Record == nil || got.Record.State != "pending" {
		t.Errorf("get of acme's order-0: %+v, want the pending record", got)
	}

	stranger := t.TempDir()
	mustCerts(t, stranger, "tls", "ca", "--kind", "client")
	mustCerts(t, stranger, "tls", "client", "--tenant", "acme")
	claim := []string{"claim", "--addr", nodes[0].grpc, "--key", "order-x", "--fingerprint", "c0ffee", "--timeout", "3s"}
	for _, tc := range []struct {
		name   string
		flags  []string
		code   int
		stderr string
	}{
		{"another tenant", append([]string{"--tenant", "globex"}, acme...), exitDenied, `the request names tenant "globex", the credentials tenant "acme"`},
		{"plaintext", nil, exitRetry, "closed the connection before answering: is it a TLS server (--tls-ca)?"},
		{"no client certificate", []string{"--tls-ca", file("cluster-ca.crt")}, exitDenied, "the server requires a client certificate"},
		// The server's alert reaches the CLI as "certificate required" or
		// "unknown certificate authority", as TLS 1.3's timing has it.
		{"certificate of another CA", []string{"--tls-ca", file("cluster-ca.crt"),
			"--tls-cert", filepath.Join(stranger, "client-acme.crt"), "--tls-key", filepath.Join(stranger, "client-acme.key")},
			exitDenied, "refused the client certificate"},
	} {
		if _, stderr, code := cli(t, append(claim, tc.flags...)...); code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", tc.name, code, stderr, tc.code, tc.stderr)
		}
	}

	before, err := os.ReadFile(file("cluster-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := cli(t, "tls", "ca", "--kind", "cluster", "--dir", pki); code != exitUsage || !strings.Contains(stderr, "--force") {
		t.Errorf("a second cluster CA: exit %d, stderr %q; want exit 2 naming --force", code, stderr)
	}
	if after, _ := os.ReadFile(file("cluster-ca.crt")); string(after) != string(before) {
		t.Error("the cluster CA was replaced without --force")
	}
	if _, stderr, code := cli(t, "tls", "node", "--name", "n4", "--dir", pki); code != exitUsage || !strings.Contains(stderr, "at least one DNS name or IP address") {
		t.Errorf("a node certificate without a name to dial: exit %d, stderr %q; want exit 2", code, stderr)
	}
	if _, err := os.Stat(file("n4.key")); !os.IsNotExist(err) {
		t.Errorf("a refused node certificate left its key behind: %v", err)
	}
}
