package certgen

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
)

// NodeRequest describes a node certificate: one certificate for the gRPC
// API and for the other nodes (--tls-cert, and the peer certificate by
// default), so it carries serverAuth and clientAuth.
type NodeRequest struct {
	// Name is the certificate's common name and names its files.
	Name string
	// DNS and IPs are the names clients reach the node by: every address
	// a client dials must be one of them (nodes check only the CA, not
	// names, between themselves). At least one is required.
	DNS, IPs []string
	// Validity is how long the certificate is valid (DefaultCertValidity
	// when zero).
	Validity time.Duration
}

// CreateNode issues a node certificate from the cluster CA and writes
// <name>.crt and <name>.key. Before they take their names, the staged
// files go through tlsconfig.LoadNode with the directory's CAs, as the
// node loads them at start: a certificate it would refuse is not written.
func (d Dir) CreateNode(r NodeRequest) ([]string, error) {
	if err := checkBase("node name", r.Name); err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: r.Name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, name := range r.DNS {
		if err := checkDNSName(name); err != nil {
			return nil, err
		}
		tmpl.DNSNames = append(tmpl.DNSNames, name)
	}
	for _, s := range r.IPs {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("%w: IP address %q does not parse (host names are DNS names, --dns)", ErrInvalid, s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	if len(tmpl.DNSNames)+len(tmpl.IPAddresses) == 0 {
		return nil, fmt.Errorf("%w: a node certificate needs at least one DNS name or IP address (--dns, --ip): "+
			"clients verify the address they dial against them", ErrInvalid)
	}
	ca, err := d.loadCA(ClusterCA)
	if err != nil {
		return nil, err
	}
	outs, err := d.issue(ca, tmpl, r.Validity, r.Name)
	if err != nil {
		return nil, err
	}
	copies, err := d.copyCACerts()
	if err != nil {
		return copies, err
	}
	written, err := d.publish(outs, func(staged map[string]string) error {
		files := tlsconfig.NodeFiles{Cert: staged[r.Name+".crt"], Key: staged[r.Name+".key"], PeerCA: ca.certFile}
		if _, err := os.Stat(d.caPath(ClientCACert)); err == nil {
			files.ClientCA = d.caPath(ClientCACert)
		}
		if _, err := tlsconfig.LoadNode(files, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			return refused(d, staged, err)
		}
		return checkNames(d, staged, staged[r.Name+".crt"], tmpl)
	})
	return append(copies, written...), err
}

// checkNames verifies that the certificate names exactly what was asked
// for, and answers to each name and address as a client dialling it
// checks. Exactly: a kept certificate with a name more or less than the
// request is one this request would not have made.
func checkNames(d Dir, staged map[string]string, certFile string, tmpl *x509.Certificate) error {
	certs, err := tlsconfig.ReadCerts(certFile)
	if err != nil {
		return refused(d, staged, err)
	}
	got, want := sanList(certs[0]), sanList(tmpl)
	if !slices.Equal(got, want) {
		return refused(d, staged, fmt.Errorf("%s names %s, not the requested %s", certFile, strings.Join(got, ", "), strings.Join(want, ", ")))
	}
	var names []string
	for _, n := range tmpl.DNSNames {
		if !strings.HasPrefix(n, "*.") {
			names = append(names, n)
		}
	}
	for _, ip := range tmpl.IPAddresses {
		names = append(names, ip.String())
	}
	for _, n := range names {
		if err := certs[0].VerifyHostname(n); err != nil {
			return refused(d, staged, err)
		}
	}
	return nil
}

// sanList is a certificate's DNS and IP names, sorted, as "DNS:x" and
// "IP:y" (how openssl shows them).
func sanList(c *x509.Certificate) []string {
	var l []string
	for _, n := range c.DNSNames {
		l = append(l, "DNS:"+n)
	}
	for _, ip := range c.IPAddresses {
		l = append(l, "IP:"+ip.String())
	}
	slices.Sort(l)
	return slices.Compact(l)
}

// ClientRequest describes a client certificate for a tenant.
type ClientRequest struct {
	// Tenant is the tenant the certificate authenticates as.
	Tenant string
	// Mapping is how the servers' --auth-cert-tenant reads a tenant from a
	// certificate (rpc.DefaultCertMapping when empty): the certificate
	// carries the tenant where the mapping looks for it.
	Mapping string
	// Name names the files (default client-<tenant>).
	Name string
	// Validity is how long the certificate is valid (DefaultCertValidity
	// when zero).
	Validity time.Duration
}

// CreateClient issues a client certificate (clientAuth only) from the
// client CA and writes <name>.crt and <name>.key. It is refused unless it
// verifies against the client CA for clientAuth, the mapping reads exactly
// the tenant from it, and the client CA is apart from the cluster CA in the
// directory (else this certificate would pass as a node's).
func (d Dir) CreateClient(r ClientRequest) ([]string, error) {
	if err := rpc.CheckTenantName(r.Tenant, rpc.DefaultLimits().MaxTenant); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if r.Mapping == "" {
		r.Mapping = rpc.DefaultCertMapping
	}
	mapping, err := rpc.ParseCertMapping(r.Mapping)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if r.Name == "" {
		if !fileBase.MatchString("client-" + r.Tenant) {
			return nil, fmt.Errorf("%w: tenant %q cannot be part of a file name: give the files a name (--name)", ErrInvalid, r.Tenant)
		}
		r.Name = "client-" + r.Tenant
	}
	if err := checkBase("client name", r.Name); err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: r.Tenant},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := nameTenant(tmpl, mapping, r.Tenant); err != nil {
		return nil, err
	}
	ca, err := d.loadCA(ClientCA)
	if err != nil {
		return nil, err
	}
	outs, err := d.issue(ca, tmpl, r.Validity, r.Name)
	if err != nil {
		return nil, err
	}
	copies, err := d.copyCACerts()
	if err != nil {
		return copies, err
	}
	written, err := d.publish(outs, func(staged map[string]string) error {
		if err := d.checkSeparate(ca.certFile, d.caPath(ClusterCACert), staged); err != nil {
			return err
		}
		certs, err := tlsconfig.ReadCerts(staged[r.Name+".crt"])
		if err != nil {
			return refused(d, staged, err)
		}
		if _, err := tls.LoadX509KeyPair(staged[r.Name+".crt"], staged[r.Name+".key"]); err != nil {
			return refused(d, staged, err)
		}
		// What a server with --tls-client-ca checks in the handshake.
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return refused(d, staged, fmt.Errorf("not accepted by the client CA: %w", err))
		}
		got, err := mapping.Tenant(certs[0])
		if err == nil && got != r.Tenant {
			err = fmt.Errorf("--auth-cert-tenant %s reads tenant %q from it, not %q", mapping, got, r.Tenant)
		}
		if err != nil {
			return refused(d, staged, err)
		}
		return nil
	})
	return append(copies, written...), err
}

// nameTenant puts the tenant into tmpl where mapping reads it. The common
// name is the tenant whatever the mapping (logs and `openssl x509` show it).
func nameTenant(tmpl *x509.Certificate, mapping rpc.CertMapping, tenant string) error {
	kind, arg, _ := strings.Cut(mapping.String(), ":")
	switch kind {
	case "san-uri-prefix":
		u, err := url.Parse(arg + tenant)
		if err != nil {
			return fmt.Errorf("%w: URI SAN %q for tenant %q: %w", ErrInvalid, arg+tenant, tenant, err)
		}
		tmpl.URIs = []*url.URL{u}
	case "san-dns-suffix":
		if err := checkDNSName(tenant + arg); err != nil {
			return fmt.Errorf("tenant %q under --auth-cert-tenant %s: %w", tenant, mapping, err)
		}
		tmpl.DNSNames = []string{tenant + arg}
	case "cn":
	default:
		return fmt.Errorf("%w: --auth-cert-tenant %s: certificates name no tenant", ErrInvalid, mapping)
	}
	return nil
}

// issue makes a key, signs tmpl for it and returns the two files.
func (d Dir) issue(ca *authority, tmpl *x509.Certificate, validity time.Duration, name string) ([]output, error) {
	if validity == 0 {
		validity = DefaultCertValidity
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	der, err := ca.sign(tmpl, &key.PublicKey, validity)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return []output{{name: name + ".crt", data: encodeCert(der)}, {name: name + ".key", data: keyPEM, secret: true}}, nil
}

// checkDNSName refuses what is not a DNS name a certificate can carry: a
// wildcard only as the whole first label (*.idemnode-headless.ns.svc, as
// the chart's pods need), labels of 1-63 letters, digits and hyphens.
func checkDNSName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: DNS name %q: %s", ErrInvalid, name, why)
	}
	if net.ParseIP(name) != nil {
		return bad("is an IP address (give it as an IP address, --ip)")
	}
	if len(name) > 253 {
		return bad("longer than 253 bytes")
	}
	labels := strings.Split(strings.TrimPrefix(name, "*."), ".")
	for _, l := range labels {
		switch {
		case l == "":
			return bad("has an empty label")
		case len(l) > 63:
			return bad("has a label longer than 63 bytes")
		case strings.Contains(l, "*"):
			return bad("a wildcard is allowed only as the whole first label (*.example.com)")
		case l[0] == '-' || l[len(l)-1] == '-':
			return bad("a label starts or ends with '-'")
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return bad(fmt.Sprintf("%q is not a letter, digit or '-'", c))
			}
		}
	}
	return nil
}
