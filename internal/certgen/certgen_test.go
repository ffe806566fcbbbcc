package certgen

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
)

// mustPKI makes both CAs in a fresh directory.
func mustPKI(t *testing.T) Dir {
	t.Helper()
	d := Dir{Path: filepath.Join(t.TempDir(), "pki")}
	for _, k := range []Kind{ClusterCA, ClientCA} {
		if _, err := d.CreateCA(k, 0); err != nil {
			t.Fatalf("create %s CA: %v", k, err)
		}
	}
	return d
}

// listDir returns the names in dir, temporary files included.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestWhatANodeNeeds: the files of every command load as a node and a
// client use them: the node with both CAs and the gossip key, the client
// certificate naming its tenant by the default mapping and refused by the
// cluster CA; keys are 0600, certificates 0644.
func TestWhatANodeNeeds(t *testing.T) {
	d := mustPKI(t)
	node, err := d.CreateNode(NodeRequest{Name: "node1", DNS: []string{"node1.example", "*.idemnode-headless.ns.svc.cluster.local"}, IPs: []string{"127.0.0.1", "::1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{d.path("node1.crt"), d.path("node1.key")}
	if !slices.Equal(node, want) {
		t.Errorf("CreateNode wrote %v, want %v", node, want)
	}
	client, err := d.CreateClient(ClientRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(client, []string{d.path("client-acme.crt"), d.path("client-acme.key")}) {
		t.Errorf("CreateClient wrote %v", client)
	}
	if _, err := d.CreateGossipKey(); err != nil {
		t.Fatal(err)
	}

	for name, perm := range map[string]os.FileMode{ClusterCACert: 0o644, ClusterCAKey: 0o600, ClientCACert: 0o644, ClientCAKey: 0o600,
		"node1.crt": 0o644, "node1.key": 0o600, "client-acme.crt": 0o644, "client-acme.key": 0o600, GossipKeyFile: 0o600} {
		if got := mode(t, d.path(name)); got != perm {
			t.Errorf("%s has mode %v, want %v", name, got, perm)
		}
	}
	if names := listDir(t, d.Path); len(names) != 9 {
		t.Errorf("the directory holds %v, want the 9 files and nothing staged", names)
	}

	n, err := tlsconfig.LoadNode(tlsconfig.NodeFiles{Cert: d.path("node1.crt"), Key: d.path("node1.key"),
		ClientCA: d.path(ClientCACert), PeerCA: d.path(ClusterCACert)}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || !n.PeerTLS() {
		t.Fatalf("a node does not load the files: %v", err)
	}
	b, err := os.ReadFile(d.path(GossipKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := cluster.ParseGossipKeys(string(b)); err != nil || len(keys) != 1 || len(keys[0]) != 32 {
		t.Errorf("gossip.keys = %q: %d keys, %v; want one 32-byte key", b, len(keys), err)
	}

	leaf := readLeaf(t, d.path("client-acme.crt"))
	mapping, _ := rpc.ParseCertMapping(rpc.DefaultCertMapping)
	if tenant, err := mapping.Tenant(leaf); tenant != "acme" || err != nil {
		t.Errorf("the default mapping reads tenant %q (%v), want acme", tenant, err)
	}
	if _, err := tls.LoadX509KeyPair(d.path("client-acme.crt"), d.path("client-acme.key")); err != nil {
		t.Errorf("client pair: %v", err)
	}
	clusterCA := readLeaf(t, d.path(ClusterCACert))
	pool := x509.NewCertPool()
	pool.AddCert(clusterCA)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Error("the cluster CA accepts a client certificate")
	}
	nodeLeaf := readLeaf(t, d.path("node1.crt"))
	for _, name := range []string{"node1.example", "pod-0.idemnode-headless.ns.svc.cluster.local", "127.0.0.1", "::1"} {
		if err := nodeLeaf.VerifyHostname(name); err != nil {
			t.Errorf("node certificate: %v", err)
		}
	}
}

func readLeaf(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	certs, err := tlsconfig.ReadCerts(file)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// TestNothingOverwrittenWithoutForce: each command refuses an existing
// file and leaves it as it was; with Force it replaces it.
func TestNothingOverwrittenWithoutForce(t *testing.T) {
	d := mustPKI(t)
	if _, err := d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"10.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateClient(ClientRequest{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateGossipKey(); err != nil {
		t.Fatal(err)
	}
	files := []string{ClusterCACert, ClusterCAKey, ClientCACert, ClientCAKey, "node1.crt", "node1.key", "client-acme.crt", "client-acme.key", GossipKeyFile}
	snapshot := func() map[string][]byte {
		m := map[string][]byte{}
		for _, f := range files {
			b, err := os.ReadFile(d.path(f))
			if err != nil {
				t.Fatal(err)
			}
			m[f] = b
		}
		return m
	}
	before := snapshot()
	again := map[string]func(Dir) ([]string, error){
		"cluster CA": func(d Dir) ([]string, error) { return d.CreateCA(ClusterCA, 0) },
		"client CA":  func(d Dir) ([]string, error) { return d.CreateCA(ClientCA, 0) },
		"node": func(d Dir) ([]string, error) {
			return d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"10.0.0.1"}})
		},
		"client":     func(d Dir) ([]string, error) { return d.CreateClient(ClientRequest{Tenant: "acme"}) },
		"gossip key": func(d Dir) ([]string, error) { return d.CreateGossipKey() },
	}
	for what, create := range again {
		if written, err := create(d); !errors.Is(err, ErrExists) || written != nil || !strings.Contains(err.Error(), "--force") {
			t.Errorf("%s again: wrote %v, err %v; want ErrExists naming --force", what, written, err)
		}
	}
	after := snapshot()
	for _, f := range files {
		if !bytes.Equal(before[f], after[f]) {
			t.Errorf("%s changed without Force", f)
		}
	}
	if names := listDir(t, d.Path); len(names) != len(files) {
		t.Errorf("the directory holds %v after the refusals", names)
	}

	// With Keep, each command finds all its files and succeeds, writing
	// nothing; one of a pair missing is still a refusal.
	kept := Dir{Path: d.Path, Keep: true}
	for what, create := range again {
		if written, err := create(kept); err != nil || written != nil {
			t.Errorf("%s with Keep: wrote %v, err %v; want nothing written, no error", what, written, err)
		}
	}
	if after := snapshot(); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Error("Keep changed files")
	}
	partial := t.TempDir()
	if _, err := (Dir{Path: partial}).CreateCA(ClusterCA, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(partial, ClusterCAKey)); err != nil {
		t.Fatal(err)
	}
	if written, err := (Dir{Path: partial, Keep: true}).CreateCA(ClusterCA, 0); !errors.Is(err, ErrExists) || written != nil {
		t.Errorf("Keep with the CA's key missing: wrote %v, err %v; want ErrExists", written, err)
	}
	if _, err := (Dir{Path: d.Path, Keep: true, Force: true}).CreateGossipKey(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Keep and Force: err %v, want ErrInvalid", err)
	}

	// With Force, in an order that keeps every step valid: the node
	// certificate from the old cluster CA before the CA is replaced.
	forced := Dir{Path: d.Path, Force: true}
	for _, what := range []string{"node", "client", "gossip key", "client CA", "cluster CA"} {
		if _, err := again[what](forced); err != nil {
			t.Fatalf("%s with Force: %v", what, err)
		}
	}
	replaced := snapshot()
	for _, f := range files {
		if bytes.Equal(before[f], replaced[f]) {
			t.Errorf("%s not replaced with Force", f)
		}
		if strings.HasSuffix(f, ".key") || f == GossipKeyFile {
			if m := mode(t, d.path(f)); m != 0o600 {
				t.Errorf("replaced %s has mode %v, want 0600", f, m)
			}
		}
	}
}

// TestBadRequestsWriteNothing: names, addresses and tenants that cannot
// make a certificate a node and its clients accept are refused with an
// error that names them, and nothing is written.
func TestBadRequestsWriteNothing(t *testing.T) {
	d := mustPKI(t)
	base := listDir(t, d.Path)
	for _, tc := range []struct {
		name string
		r    NodeRequest
		want string
	}{
		{"no SAN", NodeRequest{Name: "node1"}, "needs at least one DNS name or IP address"},
		{"bad IP", NodeRequest{Name: "node1", IPs: []string{"10.0.0.300"}}, `IP address "10.0.0.300" does not parse`},
		{"host name as IP", NodeRequest{Name: "node1", IPs: []string{"node1.example"}}, `IP address "node1.example" does not parse (host names are DNS names`},
		{"IP as DNS", NodeRequest{Name: "node1", DNS: []string{"10.0.0.1"}}, `DNS name "10.0.0.1": is an IP address`},
		{"space in DNS", NodeRequest{Name: "node1", DNS: []string{"node 1.example"}}, `DNS name "node 1.example": ' ' is not a letter`},
		{"wildcard inside", NodeRequest{Name: "node1", DNS: []string{"node*.example"}}, "wildcard is allowed only as the whole first label"},
		{"empty label", NodeRequest{Name: "node1", DNS: []string{"node1..example"}}, "empty label"},
		{"hyphen", NodeRequest{Name: "node1", DNS: []string{"-node1.example"}}, "starts or ends with '-'"},
		{"path in name", NodeRequest{Name: "../node1", IPs: []string{"10.0.0.1"}}, `node name "../node1"`},
		{"CA's name", NodeRequest{Name: "cluster-ca", IPs: []string{"10.0.0.1"}}, "would take the name of cluster-ca.crt"},
		{"no name", NodeRequest{IPs: []string{"10.0.0.1"}}, `node name ""`},
		{"outlives its CA", NodeRequest{Name: "node1", IPs: []string{"10.0.0.1"}, Validity: 6 * 365 * 24 * time.Hour}, "after its cluster CA"},
	} {
		written, err := d.CreateNode(tc.r)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || written != nil {
			t.Errorf("%s: wrote %v, err %v; want ErrInvalid with %q", tc.name, written, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		r    ClientRequest
		want string
	}{
		{"no tenant", ClientRequest{}, "tenant"},
		{"space in tenant", ClientRequest{Tenant: "ac me"}, "tenant"},
		{"tenant not a file name", ClientRequest{Tenant: "a/b"}, "give the files a name"},
		{"mapping none", ClientRequest{Tenant: "acme", Mapping: "none"}, "certificates name no tenant"},
		{"bad mapping", ClientRequest{Tenant: "acme", Mapping: "uri:x"}, `certificate mapping "uri:x"`},
		{"tenant not a DNS label", ClientRequest{Tenant: "ac_me", Mapping: "san-dns-suffix:.tenants.example"}, `DNS name "ac_me.tenants.example"`},
	} {
		written, err := d.CreateClient(tc.r)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || written != nil {
			t.Errorf("%s: wrote %v, err %v; want ErrInvalid with %q", tc.name, written, err, tc.want)
		}
	}
	if _, err := ParseKind("server"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseKind(server) = %v, want ErrInvalid", err)
	}
	if after := listDir(t, d.Path); !slices.Equal(after, base) {
		t.Errorf("refused requests wrote files: %v, before %v", after, base)
	}
}

// TestClientMappings: the tenant goes where each --auth-cert-tenant form
// reads it, and the mapping reads it back.
func TestClientMappings(t *testing.T) {
	d := mustPKI(t)
	for _, tc := range []struct {
		mapping, tenant, name string
	}{
		{"san-uri-prefix:idemnode://tenant/", "acme", ""},
		{"san-uri-prefix:spiffe://example.org/tenant/", "globex", ""},
		{"san-dns-suffix:.tenants.example", "initech", ""},
		{"cn", "umbrella", ""},
		{"", "a/b", "client-ab"},
	} {
		if _, err := d.CreateClient(ClientRequest{Tenant: tc.tenant, Mapping: tc.mapping, Name: tc.name}); err != nil {
			t.Fatalf("%s %s: %v", tc.mapping, tc.tenant, err)
		}
		name := tc.name
		if name == "" {
			name = "client-" + tc.tenant
		}
		m, _ := rpc.ParseCertMapping(cmpOr(tc.mapping, rpc.DefaultCertMapping))
		if got, err := m.Tenant(readLeaf(t, d.path(name+".crt"))); got != tc.tenant || err != nil {
			t.Errorf("%s reads %q (%v), want %q", m, got, err, tc.tenant)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestMixedRolesRefused: with the cluster CA copied as the client CA, a
// node refuses to start (tlsconfig.CheckSeparateCAs), so neither a node
// certificate nor a client certificate is issued; a CA made beside it is
// checked the same way.
func TestMixedRolesRefused(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	if _, err := d.CreateCA(ClusterCA, 0); err != nil {
		t.Fatal(err)
	}
	copyFile(t, d.path(ClusterCACert), d.path(ClientCACert))
	copyFile(t, d.path(ClusterCAKey), d.path(ClientCAKey))
	base := listDir(t, d.Path)

	_, err := d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"10.0.0.1"}})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is the cluster CA or signed by it") {
		t.Errorf("node certificate with the CAs mixed: %v, want ErrRefused from the node's check", err)
	}
	_, err = d.CreateClient(ClientRequest{Tenant: "acme"})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is the cluster CA or signed by it") {
		t.Errorf("client certificate from the cluster CA: %v, want ErrRefused", err)
	}
	if err != nil && strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("the error names a staged file, not the file itself: %v", err)
	}
	if after := listDir(t, d.Path); !slices.Equal(after, base) {
		t.Errorf("refused requests wrote files: %v, before %v", after, base)
	}

	// A client CA signed by the cluster CA (an intermediate, made with other
	// tooling) is refused when the cluster CA is made beside it.
	d2 := Dir{Path: t.TempDir()}
	if _, err := d2.CreateCA(ClusterCA, 0); err != nil {
		t.Fatal(err)
	}
	ca, err := d2.loadCA(ClusterCA)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := newKey()
	der, err := ca.sign(&x509.Certificate{Subject: pkix.Name{CommonName: "client CA under the cluster CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, &key.PublicKey, 2*DefaultCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, d2.path(ClientCACert), encodeCert(der))
	keyPEM, _ := encodeKey(key)
	writeFile(t, d2.path(ClientCAKey), keyPEM)
	if _, err := d2.CreateClient(ClientRequest{Tenant: "acme"}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is the cluster CA or signed by it") {
		t.Errorf("client certificate from a client CA the cluster CA signed: %v, want ErrRefused", err)
	}
	// A client CA made by CreateCA is a key of its own: accepted.
	if _, err := (Dir{Path: d2.Path, Force: true}).CreateCA(ClientCA, 0); err != nil {
		t.Fatalf("a fresh client CA beside the cluster CA: %v", err)
	}
	if _, err := d2.CreateClient(ClientRequest{Tenant: "acme"}); err != nil {
		t.Errorf("client certificate from the fresh client CA: %v", err)
	}
}

// TestWrongUsageRefused: a cluster CA restricted to clientAuth (made with
// other tooling) cannot vouch for serverAuth; the node's start check finds
// it, so the node certificate is refused, not written.
func TestWrongUsageRefused(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	key, _ := newKey()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clientAuth-only CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := encodeKey(key)
	writeFile(t, d.path(ClusterCACert), encodeCert(der))
	writeFile(t, d.path(ClusterCAKey), keyPEM)
	_, err = d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"10.0.0.1"}})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "serverAuth and clientAuth") {
		t.Errorf("node certificate under a clientAuth-only CA: %v, want ErrRefused naming the usages", err)
	}
	if names := listDir(t, d.Path); len(names) != 2 {
		t.Errorf("the directory holds %v, want the CA alone", names)
	}

	// The CA's key must be its certificate's.
	other, _ := newKey()
	otherPEM, _ := encodeKey(other)
	writeFile(t, d.path(ClusterCAKey), otherPEM)
	if _, err := d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"10.0.0.1"}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "is not the key of") {
		t.Errorf("CA key of another certificate: %v, want ErrInvalid", err)
	}
	// No CA at all says how to make one.
	if _, err := d.CreateClient(ClientRequest{Tenant: "acme"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "idemnode tls ca --kind client") {
		t.Errorf("no client CA: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, b)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCADirLeavesTheCAKeysOut: with CADir, a node's and a client's files
// go to a directory that receives the CA certificates but no CA key; the
// node's files load as serve loads them; a copy of another CA is refused.
func TestCADirLeavesTheCAKeysOut(t *testing.T) {
	ca := mustPKI(t)
	d := Dir{Path: filepath.Join(t.TempDir(), "node"), CADir: ca.Path}
	node, err := d.CreateNode(NodeRequest{Name: "node1", IPs: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{d.path(ClusterCACert), d.path(ClientCACert), d.path("node1.crt"), d.path("node1.key")}
	if !slices.Equal(node, want) {
		t.Errorf("CreateNode wrote %v, want %v", node, want)
	}
	// The copies are there already and the same: only the client's pair.
	client, err := d.CreateClient(ClientRequest{Tenant: "acme"})
	if err != nil || !slices.Equal(client, []string{d.path("client-acme.crt"), d.path("client-acme.key")}) {
		t.Errorf("CreateClient wrote %v, %v", client, err)
	}
	if names := listDir(t, d.Path); !slices.Equal(names, []string{"client-acme.crt", "client-acme.key", ClientCACert, ClusterCACert, "node1.crt", "node1.key"}) {
		t.Errorf("the directory holds %v", names)
	}
	for _, name := range []string{ClusterCACert, ClientCACert} {
		a, _ := os.ReadFile(ca.path(name))
		b, _ := os.ReadFile(d.path(name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s is not the CA's certificate", name)
		}
	}
	if _, err := tlsconfig.LoadNode(tlsconfig.NodeFiles{Cert: d.path("node1.crt"), Key: d.path("node1.key"),
		PeerCA: d.path(ClusterCACert), ClientCA: d.path(ClientCACert)}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Errorf("the node's directory does not load as serve loads it: %v", err)
	}

	other := mustPKI(t)
	stranger := Dir{Path: d.Path, CADir: other.Path}
	if written, err := stranger.CreateNode(NodeRequest{Name: "node2", IPs: []string{"127.0.0.2"}}); !errors.Is(err, ErrExists) || written != nil {
		t.Errorf("a node of another CA into the directory: wrote %v, err %v; want ErrExists", written, err)
	}
	if _, err := os.Stat(d.path("node2.crt")); err == nil {
		t.Error("node2.crt was written beside the other CA's certificate")
	}
}
