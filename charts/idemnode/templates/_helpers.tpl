{{/* Names, labels and the derived settings every template shares. */}}

{{- define "idemnode.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* idemnode.fullname is <release>-idemnode (or the release name alone when it already contains the chart name). */}}
{{- define "idemnode.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* idemnode.headless names the headless Service, the StatefulSet's serviceName. */}}
{{- define "idemnode.headless" -}}
{{- printf "%s-headless" (include "idemnode.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "idemnode.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "idemnode.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idemnode.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "idemnode.labels" -}}
helm.sh/chart: {{ include "idemnode.chart" . }}
{{ include "idemnode.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "idemnode.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "idemnode.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* idemnode.replicas is the validated replica count. */}}
{{- define "idemnode.replicas" -}}
{{- include "idemnode.validate" . }}
{{- int .Values.replicas }}
{{- end }}

{{/* idemnode.bootstrapExpect is --bootstrap-expect: the replica count unless set. */}}
{{- define "idemnode.bootstrapExpect" -}}
{{- if kindIs "invalid" .Values.bootstrapExpect }}
{{- int .Values.replicas }}
{{- else }}
{{- int .Values.bootstrapExpect }}
{{- end }}
{{- end }}

{{/* idemnode.podDomain is the DNS suffix of every server: <pod>.<this>. */}}
{{- define "idemnode.podDomain" -}}
{{- printf "%s.%s.svc.%s" (include "idemnode.headless" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/* idemnode.join lists every server's gossip address by its stable DNS name (memberlist resolves them). */}}
{{- define "idemnode.join" -}}
{{- $addrs := list }}
{{- $full := include "idemnode.fullname" . }}
{{- $domain := include "idemnode.podDomain" . }}
{{- range $i := until (int .Values.replicas) }}
{{- $addrs = append $addrs (printf "%s-%d.%s:%d" $full $i $domain (int $.Values.ports.gossip)) }}
{{- end }}
{{- join "," $addrs }}
{{- end }}

{{/*
idemnode.validate fails the render on configurations that would never form a
cluster or would run half-secured. It renders nothing.
*/}}
{{- define "idemnode.validate" -}}
{{- $v := .Values }}
{{- if not (or (kindIs "int64" $v.replicas) (kindIs "float64" $v.replicas) (kindIs "int" $v.replicas)) }}
{{- fail (printf "replicas must be a number, got %v" $v.replicas) }}
{{- end }}
{{- $r := int $v.replicas }}
{{- if ne (float64 $r) (float64 $v.replicas) }}
{{- fail (printf "replicas must be a whole number, got %v" $v.replicas) }}
{{- end }}
{{- if lt $r 1 }}
{{- fail (printf "replicas must be at least 1, got %d" $r) }}
{{- end }}
{{- if eq (mod $r 2) 0 }}
{{- fail (printf "replicas must be odd (1, 3 or 5): %d servers tolerate no more failures than %d and split votes; got %d" $r (sub $r 1) $r) }}
{{- end }}
{{- $be := int (include "idemnode.bootstrapExpect" .) }}
{{- if lt $be $r }}
{{- fail (printf "bootstrapExpect (%d) is lower than replicas (%d): a subset could bootstrap a cluster of its own; leave it empty" $be $r) }}
{{- end }}
{{- if gt $be $r }}
{{- fail (printf "bootstrapExpect (%d) is higher than replicas (%d): the cluster would never form; leave it empty" $be $r) }}
{{- end }}
{{- include "idemnode.validateCertManager" . }}
{{- if $v.tls.enabled }}
{{- if and (not $v.tls.certManager.enabled) (not $v.tls.secretName) }}
{{- fail "tls.enabled is true but tls.secretName is empty: name the Secret that holds the certificate and key, or let cert-manager issue it (tls.certManager.enabled)" }}
{{- end }}
{{- if or (not $v.tls.certKey) (not $v.tls.keyKey) }}
{{- fail "tls.enabled is true but tls.certKey or tls.keyKey is empty: name the Secret's keys for the certificate and the private key" }}
{{- end }}
{{- if not $v.tls.caKey }}
{{- fail "tls.enabled is true but tls.caKey is empty: name the Secret's key holding the cluster CA (ca.crt with cert-manager)" }}
{{- end }}
{{- if and $v.tls.clientCA.enabled (not $v.tls.clientCA.secretName) (not (include "idemnode.ownClientCA" .)) }}
{{- fail "tls.clientCA.enabled is true but tls.clientCA.secretName is empty: name the Secret that holds the client CA (a CA of its own, not the cluster CA)" }}
{{- end }}
{{- if and $v.tls.clientCA.enabled (not $v.tls.clientCA.key) }}
{{- fail "tls.clientCA.enabled is true but tls.clientCA.key is empty: name the Secret's key holding the CA bundle" }}
{{- end }}
{{- if not $v.gossipEncryption.enabled }}
{{- fail "tls.enabled is true but gossipEncryption.enabled is false: gossip would stay plaintext; enable both, or neither for a plaintext development cluster" }}
{{- end }}
{{- else }}
{{- if $v.tls.secretName }}
{{- fail (printf "tls.secretName is %q but tls.enabled is false: set tls.enabled=true, or clear tls.secretName" $v.tls.secretName) }}
{{- end }}
{{- if $v.tls.clientCA.enabled }}
{{- fail "tls.clientCA.enabled is true but tls.enabled is false: client certificates need TLS" }}
{{- end }}
{{- end }}
{{- if and $v.tls.clientCA.secretName (not $v.tls.clientCA.enabled) }}
{{- fail (printf "tls.clientCA.secretName is %q but tls.clientCA.enabled is false: set tls.clientCA.enabled=true, or clear tls.clientCA.secretName" $v.tls.clientCA.secretName) }}
{{- end }}
{{- if $v.gossipEncryption.enabled }}
{{- if not $v.gossipEncryption.secretName }}
{{- fail "gossipEncryption.enabled is true but gossipEncryption.secretName is empty: name the Secret that holds the gossip key" }}
{{- end }}
{{- if not $v.gossipEncryption.secretKey }}
{{- fail "gossipEncryption.enabled is true but gossipEncryption.secretKey is empty: name the Secret's key holding the gossip key" }}
{{- end }}
{{- if not $v.tls.enabled }}
{{- fail "gossipEncryption.enabled is true but tls.enabled is false: Raft and the API would stay plaintext; enable both, or neither for a plaintext development cluster" }}
{{- end }}
{{- else if $v.gossipEncryption.secretName }}
{{- fail (printf "gossipEncryption.secretName is %q but gossipEncryption.enabled is false: set gossipEncryption.enabled=true, or clear gossipEncryption.secretName" $v.gossipEncryption.secretName) }}
{{- end }}
{{- include "idemnode.validateAuth" . }}
{{- if not (has $v.podAntiAffinity.type (list "required" "preferred" "none")) }}
{{- fail (printf "podAntiAffinity.type must be required, preferred or none, got %q" $v.podAntiAffinity.type) }}
{{- end }}
{{- if not (has $v.topologySpread.whenUnsatisfiable (list "DoNotSchedule" "ScheduleAnyway")) }}
{{- fail (printf "topologySpread.whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway, got %q" $v.topologySpread.whenUnsatisfiable) }}
{{- end }}
{{- if not (has $v.log.format (list "text" "json")) }}
{{- fail (printf "log.format must be text or json, got %q" $v.log.format) }}
{{- end }}
{{- if lt (int $v.terminationGracePeriodSeconds) (add (int $v.preStopSleepSeconds) 15) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least preStopSleepSeconds + 15 (%d): SIGTERM needs time to transfer leadership, leave and drain" (int $v.terminationGracePeriodSeconds) (add (int $v.preStopSleepSeconds) 15)) }}
{{- end }}
{{- range $flag, $_ := $v.config }}
{{- if has $flag (list "node-id" "data-dir" "grpc-addr" "grpc-advertise" "raft-addr" "raft-advertise" "gossip-addr" "gossip-advertise" "http-addr" "api-addr" "join" "bootstrap-expect" "log-level" "log-format" "dev" "insecure" "tls-cert" "tls-key" "tls-client-ca" "peer-ca" "peer-cert" "peer-key" "gossip-key" "gossip-key-file" "auth" "auth-tokens-file" "auth-cert-tenant" "auth-admin" "auth-peer" "auth-delegate" "tenant-claim-rate" "tenant-claim-burst" "tenant-max-keys" "tenant-max-bytes") }}
{{- fail (printf "config.%s is set by the chart; use its own value instead (see values.yaml)" $flag) }}
{{- end }}
{{- if hasPrefix "IDEMNODE_" $flag }}
{{- fail (printf "config keys are flag names (e.g. dead-server-cleanup), not variables: got %s" $flag) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
idemnode.validateAuth fails the render on half-configured authentication: on
without any credential the servers could check (they would refuse to start),
or its settings given while it is off (they would be ignored); and on a claim
burst without a rate. It renders nothing.
*/}}
{{- define "idemnode.validateAuth" -}}
{{- $a := .Values.auth }}
{{- $certs := and .Values.tls.clientCA.enabled (ne $a.certTenant "none") }}
{{- if $a.enabled }}
{{- if and (not $a.tokensSecret) (not $certs) }}
{{- fail "auth.enabled is true but no credential could authenticate a call: set auth.tokensSecret (a Secret of `idemnode auth hash-token` lines), or require client certificates (tls.clientCA.enabled) with an auth.certTenant other than none" }}
{{- end }}
{{- if and $a.tokensSecret (not $a.tokensKey) }}
{{- fail "auth.tokensSecret is set but auth.tokensKey is empty: name the Secret's key holding the tokens file" }}
{{- end }}
{{- if and $a.peers (not .Values.tls.clientCA.enabled) }}
{{- fail "auth.peers names client certificates, but tls.clientCA.enabled is false: no client certificate is verified; clear auth.peers (servers recognise each other by the cluster CA) or enable tls.clientCA" }}
{{- end }}
{{- else }}
{{- range $name, $set := dict "auth.tokensSecret" $a.tokensSecret "auth.certTenant" $a.certTenant "auth.admins" $a.admins "auth.peers" $a.peers "auth.delegates" $a.delegates }}
{{- if $set }}
{{- fail (printf "%s is set but auth.enabled is false: set auth.enabled=true, or clear %s" $name $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- $l := .Values.limits }}
{{- if and (gt (int64 $l.tenantClaimBurst) 0) (not (gt (float64 $l.tenantClaimRate) 0.0)) }}
{{- fail "limits.tenantClaimBurst is set but limits.tenantClaimRate is 0: a burst needs a rate (claims per second per tenant)" }}
{{- end }}
{{- end }}

{{/*
idemnode.authArgs are serve's flags for authentication and the tenant limits,
one list item each (nothing when all are off). YAML numbers may arrive as
float64: the whole-number flags are printed as integers, never as 1e+10.
*/}}
{{- define "idemnode.authArgs" -}}
{{- $a := .Values.auth }}
{{- $l := .Values.limits }}
{{- if $a.enabled }}
- --auth
{{- if $a.tokensSecret }}
- --auth-tokens-file=/etc/idemnode/auth/{{ $a.tokensKey }}
{{- end }}
{{- with $a.certTenant }}
- {{ printf "--auth-cert-tenant=%s" . | quote }}
{{- end }}
{{- range $a.admins }}
- {{ printf "--auth-admin=%s" . | quote }}
{{- end }}
{{- range $a.peers }}
- {{ printf "--auth-peer=%s" . | quote }}
{{- end }}
{{- range $a.delegates }}
- {{ printf "--auth-delegate=%s" . | quote }}
{{- end }}
{{- end }}
{{- if gt (float64 $l.tenantClaimRate) 0.0 }}
- --tenant-claim-rate={{ $l.tenantClaimRate }}
{{- end }}
{{- range $flag, $value := dict "tenant-claim-burst" $l.tenantClaimBurst "tenant-max-keys" $l.tenantMaxKeys "tenant-max-bytes" $l.tenantMaxBytes }}
{{- if gt (int64 $value) 0 }}
- --{{ $flag }}={{ int64 $value }}
{{- end }}
{{- end }}
{{- end }}

{{/*
idemnode.secretItems are a Secret volume's items for the keys in the list,
each projected to a file of its own name (a key listed twice, once). A
Secret volume without items mounts every key of the Secret, present and
future: a CA's private key kept beside its certificate would reach the pods.
*/}}
{{- define "idemnode.secretItems" -}}
items:
{{- range uniq . }}
  - key: {{ . | quote }}
    path: {{ . | quote }}
{{- end }}
{{- end }}
