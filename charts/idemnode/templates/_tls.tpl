{{/*
TLS names and checks shared by the StatefulSet, the cert-manager objects and
NOTES.txt. With tls.certManager.enabled the chart names the Secrets itself
(cert-manager writes them); otherwise they are the user's existing Secrets.
*/}}

{{/* idemnode.tlsSecret is the Secret mounted at /etc/idemnode/tls: tls.crt, tls.key and the cluster CA. */}}
{{- define "idemnode.tlsSecret" -}}
{{- if .Values.tls.certManager.enabled }}
{{- printf "%s-tls" (include "idemnode.fullname" .) }}
{{- else }}
{{- .Values.tls.secretName }}
{{- end }}
{{- end }}

{{/*
idemnode.ownClientCA is "true" when the chart makes the client CA itself
(cert-manager on, client certificates on, no clientIssuerRef).
*/}}
{{- define "idemnode.ownClientCA" -}}
{{- $cm := .Values.tls.certManager }}
{{- if and $cm.enabled .Values.tls.clientCA.enabled (not $cm.clientIssuerRef.name) }}true{{ end }}
{{- end }}

{{/* idemnode.clientCASecret is the Secret holding the client CA certificate. */}}
{{- define "idemnode.clientCASecret" -}}
{{- if include "idemnode.ownClientCA" . }}
{{- printf "%s-client-ca" (include "idemnode.fullname" .) }}
{{- else }}
{{- .Values.tls.clientCA.secretName }}
{{- end }}
{{- end }}

{{/*
idemnode.clientCAKey is the key of the client CA's Secret holding the CA
certificate (--tls-client-ca): tls.crt of the chart's own client CA, else
tls.clientCA.key. The StatefulSet projects that key alone, as ca.crt.
*/}}
{{- define "idemnode.clientCAKey" -}}
{{- if include "idemnode.ownClientCA" . }}tls.crt{{ else }}{{ .Values.tls.clientCA.key }}{{ end }}
{{- end }}

{{/*
idemnode.serverDNSNames are the node certificate's DNS names, one per line:
every pod by its stable name (<pod>.<headless>), the headless Service and
the client Service, each in the four forms a pod's DNS search path resolves
(from the same namespace X, from another X.<ns>, X.<ns>.svc, and the full
X.<ns>.svc.<clusterDomain>). Peers verify each other against the cluster
CA, not by name (internal/tlsconfig PeerServerName), so these are for
clients: the SDK dials every pod, the CLI and idemhttp the client Service.
*/}}
{{- define "idemnode.serverDNSNames" -}}
{{- $full := include "idemnode.fullname" . }}
{{- $headless := include "idemnode.headless" . }}
{{- $hosts := list }}
{{- range $i := until (int .Values.replicas) }}
{{- $hosts = append $hosts (printf "%s-%d.%s" $full $i $headless) }}
{{- end }}
{{- range concat $hosts (list $headless $full) }}
{{- $x := printf "%s.%s" . $.Release.Namespace }}
{{ $x }}.svc.{{ $.Values.clusterDomain }}
{{ $x }}.svc
{{ $x }}
{{ . }}
{{- end }}
{{- range .Values.tls.certManager.extraDnsNames }}
{{ . }}
{{- end }}
{{- end }}

{{/*
idemnode.proxyClientIdentity is how the proxy's client certificate names its
tenant, in the form auth.certTenant reads (by default a URI SAN
idemnode://tenant/<tenant>): a YAML fragment of Certificate spec fields.
*/}}
{{- define "idemnode.proxyClientIdentity" -}}
{{- $tenant := .Values.tls.certManager.proxyClient.tenant }}
{{- $mapping := .Values.auth.certTenant | default "san-uri-prefix:idemnode://tenant/" }}
commonName: {{ $tenant | quote }}
{{- if hasPrefix "san-uri-prefix:" $mapping }}
uris:
  - {{ printf "%s%s" (trimPrefix "san-uri-prefix:" $mapping) $tenant | quote }}
{{- else if hasPrefix "san-dns-suffix:" $mapping }}
dnsNames:
  - {{ printf "%s%s" $tenant (trimPrefix "san-dns-suffix:" $mapping) | quote }}
{{- end }}
{{- end }}

{{/*
idemnode.validateCertManager fails the render on cert-manager settings that
contradict each other or the existing-Secret settings. It renders nothing.
*/}}
{{- define "idemnode.validateCertManager" -}}
{{- $t := .Values.tls }}
{{- $cm := $t.certManager }}
{{- if $cm.enabled }}
{{- if not $t.enabled }}
{{- fail "tls.certManager.enabled is true but tls.enabled is false: cert-manager would issue certificates nobody uses; set tls.enabled=true (and gossipEncryption)" }}
{{- end }}
{{- if $t.secretName }}
{{- fail (printf "tls.certManager.enabled is true and tls.secretName is %q: with cert-manager the chart issues the servers' Secret (%s) itself; clear tls.secretName, or turn tls.certManager off to use your own Secret" $t.secretName (include "idemnode.tlsSecret" .)) }}
{{- end }}
{{- if or (ne $t.certKey "tls.crt") (ne $t.keyKey "tls.key") (ne $t.caKey "ca.crt") }}
{{- fail "tls.certManager.enabled is true but tls.certKey, tls.keyKey or tls.caKey was changed: cert-manager writes tls.crt, tls.key and ca.crt; leave them at their defaults" }}
{{- end }}
{{- if and $t.clientCA.enabled (not $cm.clientIssuerRef.name) $t.clientCA.secretName }}
{{- fail (printf "tls.certManager.enabled is true and tls.clientCA.secretName is %q, but tls.certManager.clientIssuerRef is empty, so the chart makes the client CA itself: clear tls.clientCA.secretName, or name your client issuer in tls.certManager.clientIssuerRef" $t.clientCA.secretName) }}
{{- end }}
{{- if and $cm.clientIssuerRef.name (not $t.clientCA.enabled) }}
{{- fail "tls.certManager.clientIssuerRef is set but tls.clientCA.enabled is false: client certificates are not required, so nothing uses the client issuer; set tls.clientCA.enabled=true, or clear clientIssuerRef" }}
{{- end }}
{{- if and $cm.clientIssuerRef.name (not $t.clientCA.secretName) }}
{{- fail (printf "tls.certManager.clientIssuerRef names issuer %q, whose CA certificate the servers need: name the Secret holding it in tls.clientCA.secretName (and its key in tls.clientCA.key; only that key is mounted), e.g. the CA issuer's own Secret with key tls.crt" $cm.clientIssuerRef.name) }}
{{- end }}
{{- if and $cm.issuerRef.name $cm.clientIssuerRef.name (eq $cm.issuerRef.name $cm.clientIssuerRef.name) (eq $cm.issuerRef.kind $cm.clientIssuerRef.kind) }}
{{- fail (printf "tls.certManager.issuerRef and clientIssuerRef are the same %s %q: the servers refuse a client CA that is the cluster CA (every client certificate would pass as a server's); give clients an issuer of their own" $cm.issuerRef.kind $cm.issuerRef.name) }}
{{- end }}
{{- if $cm.proxyClient.enabled }}
{{- if not $t.clientCA.enabled }}
{{- fail "tls.certManager.proxyClient.enabled is true but tls.clientCA.enabled is false: the servers ask for no client certificate; enable tls.clientCA, or turn proxyClient off" }}
{{- end }}
{{- if not $cm.proxyClient.tenant }}
{{- fail "tls.certManager.proxyClient.enabled is true but tls.certManager.proxyClient.tenant is empty: name the tenant the proxy's certificate authenticates as" }}
{{- end }}
{{- if eq .Values.auth.certTenant "none" }}
{{- fail "tls.certManager.proxyClient.enabled is true but auth.certTenant is none: the servers take no tenant from certificates; turn proxyClient off or choose a mapping" }}
{{- end }}
{{- end }}
{{- else }}
{{- range $name, $set := dict "tls.certManager.issuerRef.name" $cm.issuerRef.name "tls.certManager.clientIssuerRef.name" $cm.clientIssuerRef.name "tls.certManager.proxyClient.enabled" $cm.proxyClient.enabled "tls.certManager.extraDnsNames" $cm.extraDnsNames "tls.certManager.extraIpAddresses" $cm.extraIpAddresses }}
{{- if $set }}
{{- fail (printf "%s is set but tls.certManager.enabled is false: set tls.certManager.enabled=true, or clear %s" $name $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
