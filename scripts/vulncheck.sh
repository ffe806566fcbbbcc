#!/usr/bin/env bash
# Checks the code paths of every package against the Go vulnerability
# database with govulncheck (pinned, installed with go install).
#
#   scripts/vulncheck.sh                        # exit 3 if a reachable vulnerability is found
#   VULNDB=file:///path scripts/vulncheck.sh    # any prepared copy of the database
#
# The database comes from https://vuln.go.dev when that answers. Machines
# that cannot reach it (ours reach only the Go module proxy) build it from
# the golang.org/x/vulndb module, which the proxy serves: its OSV entries
# go through the vulndb project's own cmd/gendb into a file:// database,
# cached per vulndb version. VULNDB_VERSION pins which snapshot of the
# entries that is; move it forward to pick up new advisories.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
GOBIN="$(go env GOPATH)/bin"
# Built with the pinned toolchain: an older govulncheck cannot load packages
# that need a newer Go.
go install golang.org/x/vuln/cmd/govulncheck@v1.9.0

# offline_db builds the database from the vulndb module into its cache dir
# and prints its file:// URL.
offline_db() {
	local out="${XDG_CACHE_HOME:-$HOME/.cache}/idemnode-vulndb/$VULNDB_VERSION" src mod
	if [ ! -f "$out/index/db.json" ]; then
		mod=$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
		[ -n "$mod" ] || { echo "vulncheck: cannot download golang.org/x/vulndb@$VULNDB_VERSION" >&2; exit 1; }
		src=$(mktemp -d)
		# Expanded now: the trap runs after the function (and its locals) is gone.
		trap "rm -rf '$src'" EXIT
		cp -r "$mod/." "$src" && chmod -R u+w "$src"
		# gendb reads the entries from a git repository (for their dates).
		git -C "$src" init -q && git -C "$src" add -A &&
			git -C "$src" -c user.name=vulncheck -c user.email=vulncheck@localhost commit -qm "vulndb $VULNDB_VERSION"
		rm -rf "$out" && mkdir -p "$(dirname "$out")"
		(cd "$src" && go run ./cmd/gendb -repo "$src" -out "$out") >&2
	fi
	echo "file://$out"
}

if [ -z "${VULNDB:-}" ]; then
	if curl -fsS -m 10 -o /dev/null https://vuln.go.dev/index/db.json 2>/dev/null; then
		VULNDB=https://vuln.go.dev
	else
		VULNDB=$(offline_db)
		echo "vulncheck: vuln.go.dev unreachable; using golang.org/x/vulndb@$VULNDB_VERSION ($VULNDB)" >&2
	fi
fi
"$GOBIN/govulncheck" -db "$VULNDB" ./...
# The modules of their own (contrib/, and the examples that import them).
for m in contrib/idempg examples/postgres contrib/idemnats examples/nats-consumer; do
	(cd "$m" && "$GOBIN/govulncheck" -db "$VULNDB" ./...)
done
