package tlsconfig

import (
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testpki"
)

// TestExpiries: each file in use reports its certificates' notAfter, and
// a replaced file reports the new one at once.
func TestExpiries(t *testing.T) {
	p := newPKI(t)
	n := p.load(t, p.files)
	leafPEM, err := os.ReadFile(p.files.Cert)
	if err != nil {
		t.Fatal(err)
	}
	leaf := parsePEM(t, leafPEM)
	got := n.Expiries()
	want := map[string]time.Time{"api": leaf.NotAfter, "peer": leaf.NotAfter,
		"client_ca": p.clients.Cert.NotAfter, "peer_ca": p.cluster.Cert.NotAfter}
	if len(got) != len(want) {
		t.Fatalf("expiries %v, want the keys of %v", got, want)
	}
	for k, w := range want {
		if !got[k].Equal(w) {
			t.Errorf("%s expires %s, want %s", k, got[k], w)
		}
	}

	// A client CA bundle whose second certificate expires first.
	soon := testpki.NewCAUntil(t, "soon", time.Now().Add(2*time.Hour))
	bundle := append(append([]byte{}, p.clients.PEM...), soon.PEM...)
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(p.files.ClientCA, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p.files.ClientCA, later, later); err != nil {
		t.Fatal(err)
	}
	if got := n.Expiries()["client_ca"]; !got.Equal(soon.Cert.NotAfter) {
		t.Errorf("client_ca after replacing the bundle expires %s, want its earliest %s", got, soon.Cert.NotAfter)
	}
}

func parsePEM(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	der, _ := nextCertificate(b)
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
