package certgen

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/idemnode/idemnode/internal/tlsconfig"
)

// CreateCA makes a self-signed CA of kind k, valid for validity, and writes
// its certificate and key (cluster-ca.* or client-ca.*); zero validity is
// DefaultCAValidity. When the other CA is in the directory already, the two
// are checked to be apart.
func (d Dir) CreateCA(k Kind, validity time.Duration) ([]string, error) {
	if validity == 0 {
		validity = DefaultCAValidity
	}
	if validity < 0 {
		return nil, fmt.Errorf("%w: a CA's validity must be positive, not %s", ErrInvalid, validity)
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: "idemnode " + string(k) + " CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		// It signs leaf certificates only: no intermediate CA below it can
		// issue certificates nobody made with this tool.
		MaxPathLenZero: true,
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create the %s CA: %w", k, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	certName, keyName := k.files()
	outs := []output{{name: certName, data: encodeCert(der)}, {name: keyName, data: keyPEM, secret: true}}
	return d.publish(outs, func(staged map[string]string) error {
		// What loadCA will ask of it before it signs (and Keep of a file
		// made elsewhere).
		if _, err := readAuthority(k, staged[certName], staged[keyName]); err != nil {
			return refused(d, staged, err)
		}
		clientCA, clusterCA := d.path(ClientCACert), d.path(ClusterCACert)
		if k == ClientCA {
			clientCA = staged[ClientCACert]
		} else {
			clusterCA = staged[ClusterCACert]
		}
		return d.checkSeparate(clientCA, clusterCA, staged)
	})
}

// checkSeparate applies the node's rule that the client CA is neither the
// cluster CA nor signed by it, when both files exist.
func (d Dir) checkSeparate(clientCA, clusterCA string, staged map[string]string) error {
	for _, f := range []string{clientCA, clusterCA} {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	if err := tlsconfig.CheckSeparateCAs(clientCA, clusterCA); err != nil {
		return refused(d, staged, err)
	}
	return nil
}

// authority is a CA read from the directory, ready to sign.
type authority struct {
	kind     Kind
	certFile string
	cert     *x509.Certificate
	key      crypto.Signer
}

// loadCA reads the CA of kind k and checks that its key is the
// certificate's and that it may sign certificates.
func (d Dir) loadCA(k Kind) (*authority, error) {
	certName, keyName := k.files()
	certFile := d.caPath(certName)
	if _, err := os.Stat(certFile); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no %s CA: %s does not exist (make it with `idemnode tls ca --kind %s`)", ErrInvalid, k, certFile, k)
	}
	return readAuthority(k, certFile, d.caPath(keyName))
}

// readAuthority reads a CA of kind k from its two files: one certificate,
// a CA's, and its key.
func readAuthority(k Kind, certFile, keyFile string) (*authority, error) {
	a := &authority{kind: k, certFile: certFile}
	certs, err := tlsconfig.ReadCerts(a.certFile)
	if err != nil {
		return nil, fmt.Errorf("read the %s CA: %w", k, err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("%w: %s holds %d certificates; the CA that signs must be alone in its file", ErrInvalid, a.certFile, len(certs))
	}
	a.cert = certs[0]
	if !a.cert.IsCA || a.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: %s is not a CA certificate", ErrInvalid, a.certFile)
	}
	if a.key, err = readKey(keyFile); err != nil {
		return nil, fmt.Errorf("read the %s CA's key: %w", k, err)
	}
	pub, ok := a.key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(a.cert.PublicKey) {
		return nil, fmt.Errorf("%w: %s is not the key of %s", ErrInvalid, keyFile, a.certFile)
	}
	return a, nil
}

// sign issues tmpl for pub, valid for validity from now, and returns the
// DER. A certificate that would outlive its CA is refused: it would stop
// verifying before its own end, and nobody would see that coming.
func (a *authority) sign(tmpl *x509.Certificate, pub crypto.PublicKey, validity time.Duration) ([]byte, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("%w: a certificate's validity must be positive, not %s", ErrInvalid, validity)
	}
	now := time.Now()
	tmpl.SerialNumber = newSerial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-backdate), now.Add(validity)
	if tmpl.NotAfter.After(a.cert.NotAfter) {
		return nil, fmt.Errorf("%w: the certificate would be valid until %s, after its %s CA (%s) expires on %s: ask for a shorter validity",
			ErrInvalid, tmpl.NotAfter.UTC().Format(time.DateOnly), a.kind, a.certFile, a.cert.NotAfter.UTC().Format(time.DateOnly))
	}
	if now.Before(a.cert.NotBefore) {
		return nil, fmt.Errorf("%w: the %s CA %s is not valid before %s", ErrInvalid, a.kind, a.certFile, a.cert.NotBefore.UTC())
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, fmt.Errorf("sign with the %s CA: %w", a.kind, err)
	}
	return der, nil
}

// refused is err, said of the files' final names rather than the staged
// ones, as ErrRefused.
func refused(d Dir, staged map[string]string, err error) error {
	msg := err.Error()
	for name, p := range staged {
		msg = strings.ReplaceAll(msg, p, d.path(name))
	}
	return fmt.Errorf("%w: %s", ErrRefused, msg)
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate a P-256 key: %w", err)
	}
	return key, nil
}

// newSerial is a random 127-bit serial number (RFC 5280 wants them unique
// per CA and at most 20 bytes; random ones need no state).
func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // rand.Read never fails on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// readKey reads a PEM private key: PKCS#8 as this package writes it, or
// the SEC 1 and PKCS#1 forms of a CA made with other tools.
func readKey(file string) (crypto.Signer, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil, fmt.Errorf("%s holds no PEM private key", file)
		}
		var key any
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if signer, ok := key.(crypto.Signer); ok {
			return signer, nil
		}
		return nil, fmt.Errorf("%s: a %T cannot sign", file, key)
	}
}
