package charts_test

// TLS from cert-manager (tls.certManager): the issuers chain as the servers
// need (a client CA apart from the cluster CA), the servers' Certificate
// names every pod and Service a client dials, and the StatefulSet reads
// its flags' files from the Secrets those Certificates write. The
// cert-manager objects are decoded strictly into the part of their schema
// the chart uses; no cert-manager code or cluster is involved.

import (
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// certificate is the part of cert-manager's cert-manager.io/v1 Certificate
// that the chart fills; a field the chart adds must be declared here.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string   `json:"secretName"`
		CommonName  string   `json:"commonName"`
		DNSNames    []string `json:"dnsNames"`
		IPAddresses []string `json:"ipAddresses"`
		URIs        []string `json:"uris"`
		IsCA        bool     `json:"isCA"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		Usages      []string `json:"usages"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		IssuerRef issuerRef `json:"issuerRef"`
	} `json:"spec"`
}

type issuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Group string `json:"group"`
}

// issuer is a cert-manager.io/v1 Issuer of the two kinds the chart makes.
type issuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SelfSigned *struct{} `json:"selfSigned"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca"`
	} `json:"spec"`
}

// certManagerOn are the --set pairs of a cert-manager cluster with its own
// CAs and client certificates required.
func certManagerOn(extra ...string) []string {
	return append([]string{"tls.enabled=true", "tls.certManager.enabled=true", "tls.clientCA.enabled=true",
		"gossipEncryption.enabled=true", "gossipEncryption.secretName=idem-gossip"}, extra...)
}

// caChain follows ref through the rendered issuers to a self-signed root
// and returns the CA Certificates on the way, the issuing CA first. A
// reference to an issuer the chart did not render is fatal.
func (m *manifests) caChain(t *testing.T, ref issuerRef) []string {
	t.Helper()
	var chain []string
	for range 10 {
		if ref.Kind != "Issuer" || ref.Group != "cert-manager.io" {
			t.Fatalf("issuerRef %+v: want a cert-manager.io Issuer the chart renders", ref)
		}
		iss := m.issuers[ref.Name]
		if iss == nil {
			t.Fatalf("issuerRef names Issuer %q, which is not rendered (have %v)", ref.Name, keys(m.issuers))
		}
		if iss.Spec.SelfSigned != nil {
			return chain
		}
		if iss.Spec.CA == nil {
			t.Fatalf("Issuer %s is neither selfSigned nor ca", iss.Name)
		}
		ca := m.certificateFor(iss.Spec.CA.SecretName)
		if ca == nil || !ca.Spec.IsCA {
			t.Fatalf("CA Issuer %s signs with Secret %s, which no isCA Certificate writes", iss.Name, iss.Spec.CA.SecretName)
		}
		chain = append(chain, ca.Name)
		ref = ca.Spec.IssuerRef
	}
	t.Fatalf("issuer chain from %+v does not end in a self-signed Issuer: %v", ref, chain)
	return nil
}

// certificateFor returns the Certificate that writes Secret name, or nil.
func (m *manifests) certificateFor(secret string) *certificate {
	for _, c := range m.certificates {
		if c.Spec.SecretName == secret {
			return c
		}
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// serverNames are the names clients dial the servers by: every pod by its
// stable DNS name and both Services, each in the four forms a pod's DNS
// search path resolves (X from the same namespace, X.<ns> from another,
// X.<ns>.svc, and the full X.<ns>.svc.cluster.local).
func serverNames(replicas int) []string {
	var hosts []string
	for i := range replicas {
		hosts = append(hosts, fmt.Sprintf("%s-%d.%s", fullname, i, headless))
	}
	hosts = append(hosts, fullname, headless)
	var names []string
	for _, h := range hosts {
		names = append(names, h, h+"."+ns, h+"."+ns+".svc", h+"."+ns+".svc.cluster.local")
	}
	return names
}

// missingNames returns the names (or IP addresses) the Certificate's
// dnsNames and ipAddresses do not cover, by crypto/x509's own host name
// matching (wildcards included).
func missingNames(c *certificate, names []string) []string {
	leaf := &x509.Certificate{DNSNames: c.Spec.DNSNames}
	for _, a := range c.Spec.IPAddresses {
		leaf.IPAddresses = append(leaf.IPAddresses, net.ParseIP(a))
	}
	var missing []string
	for _, n := range names {
		if leaf.VerifyHostname(n) != nil {
			missing = append(missing, n)
		}
	}
	return missing
}

func TestCertManagerRender(t *testing.T) {
	for _, replicas := range []int{3, 5} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			m := render(t, certManagerOn(fmt.Sprintf("replicas=%d", replicas),
				"tls.certManager.proxyClient.enabled=true", "tls.certManager.proxyClient.tenant=payments")...)

			// The servers' certificate, from the chart's cluster CA.
			node := m.certificates[fullname+"-tls"]
			if node == nil {
				t.Fatalf("no node Certificate %s-tls: %v", fullname, keys(m.certificates))
			}
			if node.Spec.IsCA {
				t.Error("the node Certificate is a CA")
			}
			peerChain := m.caChain(t, node.Spec.IssuerRef)
			if !slices.Equal(peerChain, []string{fullname + "-cluster-ca"}) {
				t.Errorf("node Certificate's CA chain %v, want the chart's cluster CA alone", peerChain)
			}
			if missing := missingNames(node, serverNames(replicas)); len(missing) != 0 {
				t.Errorf("node Certificate's dnsNames %q do not cover %q", node.Spec.DNSNames, missing)
			}
			// The check itself catches a pod left out.
			dropped := *node
			last := fmt.Sprintf("%s-%d.%s.%s.svc", fullname, replicas-1, headless, ns)
			dropped.Spec.DNSNames = slices.DeleteFunc(slices.Clone(node.Spec.DNSNames), func(n string) bool { return n == last })
			if missing := missingNames(&dropped, serverNames(replicas)); !slices.Equal(missing, []string{last}) {
				t.Errorf("without %s, missingNames reports %q", last, missing)
			}
			for _, u := range []string{"server auth", "client auth", "digital signature", "key encipherment"} {
				if !slices.Contains(node.Spec.Usages, u) {
					t.Errorf("node Certificate usages %q lack %q (servers present it to each other and dial with it)", node.Spec.Usages, u)
				}
			}

			// The servers read their certificate, key and cluster CA from
			// the Secret it writes.
			for flag, want := range map[string]string{"--tls-cert": "tls.crt", "--tls-key": "tls.key", "--peer-ca": "ca.crt"} {
				if secret, key := m.secretFile(t, flag); secret != node.Spec.SecretName || key != want {
					t.Errorf("%s reads Secret %s key %s, want the node Certificate's %s key %s", flag, secret, key, node.Spec.SecretName, want)
				}
			}

			// The client CA: a CA of its own, from a different issuer, whose
			// certificate alone reaches the servers.
			secret, key := m.secretFile(t, "--tls-client-ca")
			clientCA := m.certificateFor(secret)
			if clientCA == nil || !clientCA.Spec.IsCA {
				t.Fatalf("--tls-client-ca reads Secret %s, which no isCA Certificate writes", secret)
			}
			if key != "tls.crt" {
				t.Errorf("--tls-client-ca reads key %s of the client CA's Secret, want tls.crt (the CA certificate)", key)
			}
			if clientCA.Spec.SecretName == node.Spec.SecretName || slices.Contains(m.caChain(t, clientCA.Spec.IssuerRef), peerChain[0]) {
				t.Errorf("client CA %s is the cluster CA or signed by it: the servers refuse it", clientCA.Name)
			}
			clientIssuers := 0
			for _, iss := range m.issuers {
				if iss.Spec.CA != nil && iss.Spec.CA.SecretName == clientCA.Spec.SecretName {
					clientIssuers++
					if iss.Name == node.Spec.IssuerRef.Name {
						t.Errorf("the node Certificate's issuer %s signs with the client CA", iss.Name)
					}
				}
			}
			if clientIssuers != 1 {
				t.Errorf("%d CA Issuers sign with the client CA, want 1", clientIssuers)
			}
			for _, ca := range []*certificate{clientCA, m.certificates[peerChain[0]]} {
				if ca.Spec.PrivateKey.RotationPolicy != "Never" {
					t.Errorf("CA %s rotationPolicy %q, want Never (a renewed CA must still verify what it signed)", ca.Name, ca.Spec.PrivateKey.RotationPolicy)
				}
			}

			// The proxy sidecar's client certificate: from the client CA,
			// naming its tenant the way the servers read it by default.
			pc := m.certificateFor("idemnode-proxy-client")
			if pc == nil {
				t.Fatalf("no Certificate writes the sidecar's Secret idemnode-proxy-client: %v", keys(m.certificates))
			}
			if chain := m.caChain(t, pc.Spec.IssuerRef); len(chain) == 0 || chain[0] != clientCA.Name {
				t.Errorf("proxy client Certificate's CA chain %v, want the client CA %s", chain, clientCA.Name)
			}
			if !slices.Equal(pc.Spec.URIs, []string{"idemnode://tenant/payments"}) || !slices.Contains(pc.Spec.Usages, "client auth") ||
				slices.Contains(pc.Spec.Usages, "server auth") {
				t.Errorf("proxy client Certificate uris %q usages %q, want idemnode://tenant/payments, client auth only", pc.Spec.URIs, pc.Spec.Usages)
			}
		})
	}
}

// TestCertManagerNamedIssuersRender: with issuerRef and clientIssuerRef the
// chart makes no issuer of its own; the client CA certificate comes from
// the Secret named for it.
func TestCertManagerNamedIssuersRender(t *testing.T) {
	m := render(t, certManagerOn("tls.certManager.issuerRef.name=corp-idemnode", "tls.certManager.issuerRef.kind=ClusterIssuer",
		"tls.certManager.clientIssuerRef.name=corp-clients", "tls.certManager.clientIssuerRef.kind=ClusterIssuer",
		"tls.clientCA.secretName=corp-clients-ca", "tls.clientCA.key=tls.crt",
		"tls.certManager.proxyClient.enabled=true", "tls.certManager.proxyClient.tenant=payments", "auth.enabled=true", "auth.certTenant=cn",
		"tls.certManager.extraDnsNames={idemnode.example.com}", "tls.certManager.extraIpAddresses={192.0.2.10,2001:db8::10}")...)
	if len(m.issuers) != 0 || len(m.certificates) != 2 {
		t.Fatalf("want the node and proxy Certificates and no Issuer, got Certificates %v Issuers %v", keys(m.certificates), keys(m.issuers))
	}
	node := m.certificates[fullname+"-tls"]
	if want := (issuerRef{"corp-idemnode", "ClusterIssuer", "cert-manager.io"}); node == nil || node.Spec.IssuerRef != want {
		t.Fatalf("node Certificate %+v, want issuerRef %+v", node, want)
	}
	if missing := missingNames(node, append(serverNames(3), "idemnode.example.com", "192.0.2.10", "2001:db8::10")); len(missing) != 0 {
		t.Errorf("node Certificate's dnsNames do not cover %q", missing)
	}
	if secret, key := m.secretFile(t, "--peer-ca"); secret != node.Spec.SecretName || key != "ca.crt" {
		t.Errorf("--peer-ca reads %s/%s, want the node Certificate's ca.crt", secret, key)
	}
	if secret, key := m.secretFile(t, "--tls-client-ca"); secret != "corp-clients-ca" || key != "tls.crt" {
		t.Errorf("--tls-client-ca reads %s/%s, want corp-clients-ca/tls.crt", secret, key)
	}
	pc := m.certificates[fullname+"-proxy-client"]
	if want := (issuerRef{"corp-clients", "ClusterIssuer", "cert-manager.io"}); pc == nil || pc.Spec.IssuerRef != want ||
		pc.Spec.CommonName != "payments" || len(pc.Spec.URIs) != 0 {
		t.Errorf("proxy client Certificate %+v, want issuer %+v and tenant payments as its CN (auth.certTenant=cn)", pc, want)
	}

	// A named cluster CA issuer beside the chart's own client CA.
	m = render(t, certManagerOn("tls.certManager.issuerRef.name=corp-idemnode")...)
	if _, ok := m.certificates[fullname+"-cluster-ca"]; ok {
		t.Error("the chart made a cluster CA although issuerRef names one")
	}
	secret, _ := m.secretFile(t, "--tls-client-ca")
	if ca := m.certificateFor(secret); ca == nil || len(m.caChain(t, ca.Spec.IssuerRef)) != 0 {
		t.Errorf("--tls-client-ca reads %s, want the chart's self-signed client CA", secret)
	}

	// Existing Secrets, the default, render no cert-manager object.
	m = render(t, tlsOn()...)
	if len(m.certificates)+len(m.issuers) != 0 {
		t.Errorf("TLS from an existing Secret renders cert-manager objects: %v %v", keys(m.certificates), keys(m.issuers))
	}
}
