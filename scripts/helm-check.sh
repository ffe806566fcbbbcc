#!/usr/bin/env bash
# Checks the Helm chart in charts/idemnode:
#   installs helm with `go install` (scripts/helm-install.sh: a few minutes
#   once, then cached), runs helm lint, renders 3 and 5 replicas with TLS
#   off, on from existing Secrets, and on from cert-manager (checking that
#   the node Certificate names every pod), checks that an even replica count
#   and half-configured TLS are refused, then runs the Go chart test (strict
#   decoding into k8s.io/api types and the chart's promises;
#   charts/chart_test.go, charts/certmanager_test.go, and
#   charts/secretvolumes_test.go: only the keys the servers read are mounted).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."

# helm template assumes Kubernetes v1.20 unless told; the chart needs >= 1.30.
kube_version=1.31.0
chart=charts/idemnode

source scripts/helm-install.sh

tls_on=(--set tls.enabled=true --set tls.secretName=idemnode-tls --set tls.clientCA.enabled=true
	--set tls.clientCA.secretName=idemnode-client-ca --set gossipEncryption.enabled=true --set gossipEncryption.secretName=idemnode-gossip)
# TLS from cert-manager: the chart's own cluster CA and client CA.
tls_certmanager=(--set tls.enabled=true --set tls.certManager.enabled=true --set tls.clientCA.enabled=true
	--set gossipEncryption.enabled=true --set gossipEncryption.secretName=idemnode-gossip)

echo "== helm lint"
helm lint --strict --kube-version "$kube_version" "$chart"
helm lint --strict --kube-version "$kube_version" "$chart" --set replicas=5 "${tls_on[@]}" --set serviceMonitor.enabled=true \
	--set prometheusRule.enabled=true --set grafanaDashboard.enabled=true
helm lint --strict --kube-version "$kube_version" "$chart" "${tls_certmanager[@]}"

out=$(mktemp -d /tmp/idemnode-helm.XXXXXX)
trap 'rm -rf "$out"' EXIT

echo "== helm template"
for replicas in 3 5; do
	for tls in off on cert-manager; do
		args=(--set "replicas=$replicas")
		[[ "$tls" == on ]] && args+=("${tls_on[@]}")
		[[ "$tls" == cert-manager ]] && args+=("${tls_certmanager[@]}")
		f="$out/r$replicas-tls-$tls.yaml"
		helm template idemnode "$chart" --namespace idemnode --kube-version "$kube_version" "${args[@]}" >"$f"
		kinds=$(grep -E '^kind: ' "$f" | sed 's/kind: //' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')
		grep -q "IDEMNODE_BOOTSTRAP_EXPECT: \"$replicas\"" "$f" ||
			{ echo "replicas=$replicas tls=$tls: bootstrap-expect is not $replicas" >&2; exit 1; }
		if [[ "$tls" == cert-manager ]]; then
			# The release is named idemnode, so the chart's fullname is too.
			for ((i = 0; i < replicas; i++)); do
				grep -qF -- "- \"idemnode-$i.idemnode-headless.idemnode.svc.cluster.local\"" "$f" &&
					grep -qF -- "- \"idemnode-$i.idemnode-headless\"" "$f" ||
					{ echo "replicas=$replicas tls=cert-manager: the node Certificate does not name pod idemnode-$i" >&2; exit 1; }
			done
			grep -qF -- "secretName: idemnode-tls" "$f" && grep -q -- '--peer-ca=/etc/idemnode/tls/ca.crt' "$f" &&
				grep -q 'isCA: true' "$f" && ! grep -q -- '- --insecure' "$f" ||
				{ echo "replicas=$replicas tls=cert-manager: node Secret, CA or TLS flags missing, or --insecure rendered" >&2; exit 1; }
		elif [[ "$tls" == on ]]; then
			grep -q -- '--tls-cert=/etc/idemnode/tls/tls.crt' "$f" && grep -q -- '--peer-ca=/etc/idemnode/tls/ca.crt' "$f" &&
				grep -q 'defaultMode: 0400' "$f" && ! grep -q -- '- --insecure' "$f" ||
				{ echo "replicas=$replicas tls=on: TLS flags or 0400 Secret mount missing, or --insecure rendered" >&2; exit 1; }
		elif grep -q -- '--tls-' "$f" || ! grep -q -- '- --insecure' "$f"; then
			echo "replicas=$replicas tls=off: TLS flags rendered, or --insecure missing" >&2; exit 1
		fi
		echo "replicas=$replicas tls=$tls: ${kinds%, }"
	done
done

echo "== refused configurations"
refuse() { # refuse WANT ARGS...: the render must fail and say WANT
	local want=$1 err
	shift
	if err=$(helm template idemnode "$chart" --kube-version "$kube_version" "$@" 2>&1 >/dev/null); then
		echo "rendered, but must fail: $*" >&2; exit 1
	fi
	grep -qF -- "$want" <<<"$err" || { echo "failed without saying '$want': $*: $err" >&2; exit 1; }
	echo "refused ($want): $*"
}
refuse "replicas must be odd" --set replicas=4
refuse "tls.secretName is empty" --set tls.enabled=true
refuse "tls.enabled is false" --set tls.secretName=idemnode-tls
refuse "gossipEncryption.enabled is false" --set tls.enabled=true --set tls.secretName=idemnode-tls
refuse "lower than replicas" --set replicas=5 --set bootstrapExpect=3
refuse "clear tls.secretName, or turn tls.certManager off" "${tls_certmanager[@]}" --set tls.secretName=idemnode-tls
refuse "tls.certManager.enabled is true but tls.enabled is false" --set tls.certManager.enabled=true

echo "== go test ./charts"
# The real-Prometheus test runs with the README's test command (scripts/test.sh);
# here, the chart's own tests.
go test -count=1 -skip TestObservabilityAgainstRealPrometheus ./charts/
