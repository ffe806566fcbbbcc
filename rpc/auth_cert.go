package rpc

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// CertMapping derives a tenant from a verified client certificate. Its
// forms, as --auth-cert-tenant spells them:
//
//	san-uri-prefix:<prefix>  the URI SAN that starts with prefix, less the
//	                         prefix (idemnode://tenant/acme -> acme); the default
//	san-dns-suffix:<suffix>  the DNS SAN that ends with suffix (which starts
//	                         with a dot), less it (acme.tenants.example -> acme)
//	cn                       the subject's common name
//	none                     certificates name no tenant (tokens only)
//
// SANs are preferred to the CN: they are typed and a CA constrains them
// (name constraints), while a CN is free text. A certificate with two
// matching SANs that name different tenants names none: an ambiguous
// credential is refused rather than resolved by an order.
type CertMapping struct {
	kind string // "san-uri-prefix", "san-dns-suffix", "cn" or "" (none)
	arg  string
}

// DefaultCertMapping is the mapping --auth-cert-tenant defaults to.
const DefaultCertMapping = "san-uri-prefix:idemnode://tenant/"

// ParseCertMapping parses the forms above.
func ParseCertMapping(s string) (CertMapping, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	switch {
	case s == "none":
		return CertMapping{}, nil
	case s == "cn":
		return CertMapping{kind: "cn"}, nil
	case kind == "san-uri-prefix" && hasArg && arg != "":
		return CertMapping{kind: kind, arg: arg}, nil
	case kind == "san-dns-suffix" && hasArg && strings.HasPrefix(arg, ".") && len(arg) > 1:
		return CertMapping{kind: kind, arg: arg}, nil
	}
	return CertMapping{}, fmt.Errorf("certificate mapping %q: want cn, san-uri-prefix:<prefix>, san-dns-suffix:.<suffix> or none", s)
}

// Enabled reports whether certificates name tenants at all.
func (m CertMapping) Enabled() bool { return m.kind != "" }

// String returns the mapping in the form ParseCertMapping reads.
func (m CertMapping) String() string {
	switch m.kind {
	case "":
		return "none"
	case "cn":
		return "cn"
	}
	return m.kind + ":" + m.arg
}

var errNoTenantInCert = errors.New("the client certificate names no tenant")

// Tenant returns the tenant c names.
func (m CertMapping) Tenant(c *x509.Certificate) (string, error) {
	var names []string
	switch m.kind {
	case "cn":
		names = append(names, c.Subject.CommonName)
	case "san-uri-prefix":
		for _, u := range c.URIs {
			if rest, ok := strings.CutPrefix(u.String(), m.arg); ok {
				names = append(names, rest)
			}
		}
	case "san-dns-suffix":
		for _, d := range c.DNSNames {
			if rest, ok := strings.CutSuffix(d, m.arg); ok {
				names = append(names, rest)
			}
		}
	}
	tenant := ""
	for _, n := range names {
		switch {
		case n == "":
		case tenant == "":
			tenant = n
		case tenant != n:
			return "", fmt.Errorf("%w: it names both %q and %q (%s)", errNoTenantInCert, tenant, n, m)
		}
	}
	if tenant == "" {
		return "", fmt.Errorf("%w (mapping %s)", errNoTenantInCert, m)
	}
	return tenant, nil
}

// certNames returns every name a certificate carries (CN, DNS and URI
// SANs), for matching against the list of peer names.
func certNames(c *x509.Certificate) []string {
	names := append([]string{c.Subject.CommonName}, c.DNSNames...)
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	return names
}
