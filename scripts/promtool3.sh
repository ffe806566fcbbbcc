#!/usr/bin/env bash
# Checks and unit-tests the alert rules with Prometheus 3's promtool, as the
# tests do with Debian's Prometheus 2.42 (charts/observe_test.go): the rules
# must evaluate alike on both (3.x changed range selection, regex matching
# of newlines and some function names). Prometheus 3 is not packaged here,
# so promtool is built from the module proxy once (a few minutes) and
# cached in GOBIN or $(go env GOPATH)/bin. promtool cannot be go-installed
# (prometheus's go.mod has exclude directives), hence a scratch module.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."

version=v0.309.1 # Prometheus 3.9.1
bindir=$(go env GOBIN)
if [[ -z "$bindir" ]]; then
	gopath=$(go env GOPATH)
	bindir="${gopath%%:*}/bin"
fi
promtool="$bindir/promtool-$version"
if [[ ! -x "$promtool" ]]; then
	echo "building promtool $version (Prometheus 3) from the module proxy (a few minutes, once)"
	start=$SECONDS
	work=$(mktemp -d /tmp/idemnode-promtool.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	(
		cd "$work"
		go mod init promtool-build 2>/dev/null
		go get "github.com/prometheus/prometheus/cmd/promtool@$version" >/dev/null
		mkdir -p "$bindir"
		go build -trimpath -ldflags=-s -o "$promtool" github.com/prometheus/prometheus/cmd/promtool
	)
	echo "promtool built at $promtool in $((SECONDS - start))s"
fi
echo "promtool of Prometheus 3.9.1 (module $version):"
"$promtool" check rules charts/idemnode/files/alerts.yaml
"$promtool" test rules charts/idemnode/files/alerts_test.yaml
