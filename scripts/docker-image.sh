#!/usr/bin/env bash
# Builds the idemnode container image without pulling any base image: the
# static binary is built here on the host (CGO_ENABLED=0) and copied into a
# FROM scratch image (see Dockerfile). Beside it, the same way, the example
# order service that docker-compose.yml runs behind `idemnode proxy`
# (examples/orders): idemnode-orders with the same tag.
#   scripts/docker-image.sh [TAG] [BINARY]   default tag idemnode:dev; BINARY
#                                            also keeps a copy of the binary there
#   scripts/docker-image.sh --from BINARY [--platform linux/arm64] TAG
#       the image of that static linux binary, as built (scripts/release.sh
#       uses it so the image holds the released binary); no example image.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
from="" platform=linux/amd64
while [[ "${1:-}" == --* ]]; do
	case "$1" in
	--from) from=$(realpath "$2") ;;
	--platform) platform=$2 ;;
	*) echo "docker-image.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift 2
done
tag="${1:-idemnode:dev}"
keep="${2:-}"
ctx=$(mktemp -d /tmp/idemnode-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir "$ctx/data"
if [[ -n "$from" ]]; then
	cp "$from" "$ctx/idemnode"
	# FROM scratch and COPY run nothing, so another platform's image needs no emulation.
	docker build --quiet --platform "$platform" -f Dockerfile -t "$tag" "$ctx" >/dev/null 2>"$ctx/build.err" || { cat "$ctx/build.err" >&2; exit 1; }
	echo "built image $tag for $platform from $from"
	exit 0
fi
# The commit `idemnode version` prints (the go command's own VCS stamp may
# be off, e.g. GOFLAGS=-buildvcs=false); "-modified" when the tree is not clean.
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit+=-modified
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w -X main.commit=$commit" -o "$ctx/idemnode" ./cmd/idemnode
# The legacy builder warns that it is deprecated; the build itself needs nothing else.
docker build --quiet -f Dockerfile -t "$tag" "$ctx" >/dev/null 2>"$ctx/build.err" || { cat "$ctx/build.err" >&2; exit 1; }
if [[ -n "$keep" ]]; then cp "$ctx/idemnode" "$keep"; fi
echo "built image $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.1f MB", $1/1e6}'))"

orders_tag="idemnode-orders:${tag##*:}"
mkdir "$ctx/orders"
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o "$ctx/orders/orders" ./examples/orders
docker build --quiet -f examples/orders/Dockerfile -t "$orders_tag" "$ctx/orders" >/dev/null 2>"$ctx/build.err" || { cat "$ctx/build.err" >&2; exit 1; }
echo "built image $orders_tag (the example upstream)"
