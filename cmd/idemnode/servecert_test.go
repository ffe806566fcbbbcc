package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemnode/idemnode/internal/certgen"
	"github.com/idemnode/idemnode/internal/testaddr"
)

// TestServeRefusesAClientCertificate: a shell that sourced a client's env
// file (scripts/cluster.sh's) holds IDEMNODE_TLS_CERT and _KEY, a client
// certificate (clientAuth only) that serve also reads as its own. serve
// refuses it before listening, exit 2, naming the variable the value came
// from; given as a flag, the message names the flag and no variable.
func TestServeRefusesAClientCertificate(t *testing.T) {
	t.Parallel()
	needBinary(t)
	pki := certgen.Dir{Path: filepath.Join(t.TempDir(), "pki")}
	for _, k := range []certgen.Kind{certgen.ClusterCA, certgen.ClientCA} {
		if _, err := pki.CreateCA(k, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pki.CreateClient(certgen.ClientRequest{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(pki.Path, "client-acme.crt"), filepath.Join(pki.Path, "client-acme.key")
	addrs := testaddr.New(t)
	serve := []string{"serve", "--dev", "--data-dir", filepath.Join(t.TempDir(), "data"), "--grpc-addr", freeAddrOn(t, addrs.IP(1))}

	env := append(os.Environ(), "IDEMNODE_TLS_CERT="+cert, "IDEMNODE_TLS_KEY="+key)
	stdout, stderr, code := cliEnv(t, env, "", serve...)
	if code != exitUsage || !strings.Contains(stderr, "no serverAuth") || !strings.Contains(stderr, "IDEMNODE_TLS_CERT") ||
		!strings.Contains(stderr, "env file") {
		t.Errorf("serve with a client certificate from IDEMNODE_TLS_CERT: exit %d, stdout %q, stderr %q; "+
			"want exit 2 naming serverAuth, the variable and the env file", code, stdout, stderr)
	}

	stdout, stderr, code = cli(t, append(serve, "--tls-cert", cert, "--tls-key", key)...)
	if code != exitUsage || !strings.Contains(stderr, "no serverAuth") || strings.Contains(stderr, "IDEMNODE_TLS_CERT") {
		t.Errorf("serve --tls-cert with a client certificate: exit %d, stdout %q, stderr %q; want exit 2 naming serverAuth and no variable",
			code, stdout, stderr)
	}
}
