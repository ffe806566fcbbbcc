package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ClientFiles names what a client needs to dial a server over TLS.
type ClientFiles struct {
	// CA verifies the server's certificate; empty uses the system roots.
	CA string
	// Cert and Key are the client certificate, for servers that require one.
	Cert, Key string
	// ServerName is the name the server's certificate must carry; empty
	// means the host of the address dialled.
	ServerName string
}

// Enabled reports whether any TLS setting is given; none means plaintext.
func (f ClientFiles) Enabled() bool {
	return f.CA != "" || f.Cert != "" || f.Key != "" || f.ServerName != ""
}

// Client returns the TLS configuration of a client, or an error naming the
// file that could not be used.
func Client(f ClientFiles) (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("a client certificate and its key go together")
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		certs, err := ReadCerts(f.CA)
		if err != nil {
			return nil, fmt.Errorf("CA: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		for _, cert := range certs {
			c.RootCAs.AddCert(cert)
		}
	}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", f.Cert, f.Key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// nextCertificate returns the DER bytes of the next CERTIFICATE block of a
// PEM bundle (nil at the end) and the rest; other blocks are skipped.
func nextCertificate(b []byte) (der, rest []byte) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, nil
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes, b
		}
	}
}
