#!/usr/bin/env bash
# Checks what scripts/release.sh makes, as CI runs it: a release of a test
# version into a temporary directory, then
#   - SHA256SUMS verifies (sha256sum -c),
#   - the binaries are rebuilt into a second directory and have the same bytes,
#   - the linux/amd64 binary answers `version` with the release's version and
#     this commit,
#   - the linux/amd64 image archive loads (docker load, after removing the tag)
#     and its container answers `version` the same; the arm64 archive holds an
#     arm64 image (skipped, and said, when no Docker engine answers),
#   - the packaged chart renders (helm template on the .tgz) with the
#     release's image by default.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."

version=v0.0.0-check.$$
work=$(mktemp -d /tmp/idemnode-release-check.XXXXXX)
images=(--no-images)
if docker info >/dev/null 2>&1; then
	images=()
fi
cleanup() {
	((${#images[@]})) || docker rmi "idemnode:$version" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "release-check: $*" >&2; exit 1; }

start=$SECONDS
scripts/release.sh "${images[@]}" "$version" "$work/dist"
dist=$work/dist

echo "== checksums"
(cd "$dist" && sha256sum -c --strict SHA256SUMS)

echo "== reproducible binaries"
scripts/release.sh --no-images "$version" "$work/again" >/dev/null
for bin in "$dist"/idemnode_"${version}"_*_*[0-9]; do
	cmp "$bin" "$work/again/${bin##*/}" || fail "${bin##*/} differs between two builds of one commit"
	cmp "$bin.cdx.json" "$work/again/${bin##*/}.cdx.json" || fail "${bin##*/}.cdx.json differs between two builds"
	echo "${bin##*/}: same bytes twice ($(sha256sum <"$bin" | cut -c1-16)…), SBOM too"
done

echo "== version"
commit=$(git rev-parse HEAD)
check_version() { # check_version WHAT OUTPUT
	grep -qx "idemnode $version" <<<"$2" && grep -q "^commit: $commit" <<<"$2" ||
		fail "$1 does not say version $version, commit $commit: $2"
	echo "$1: $(head -2 <<<"$2" | tr '\n' ' ')"
}
check_version "linux/amd64 binary" "$("$dist/idemnode_${version}_linux_amd64" version)"

if ((${#images[@]})); then
	echo "image checks skipped: no Docker engine answers 'docker info'"
else
	echo "== image"
	docker rmi "idemnode:$version" >/dev/null
	docker load -i "$dist/idemnode_${version}_linux_arm64.image.tar"
	arch=$(docker image inspect -f '{{.Os}}/{{.Architecture}}' "idemnode:$version")
	[[ "$arch" == linux/arm64 ]] || fail "the arm64 archive holds a $arch image"
	docker rmi "idemnode:$version" >/dev/null
	docker load -i "$dist/idemnode_${version}_linux_amd64.image.tar"
	check_version "image idemnode:$version" "$(docker run --rm "idemnode:$version" version)"
fi

echo "== chart"
source scripts/helm-install.sh
chart="$dist/idemnode-${version#v}.tgz"
rendered=$(helm template idemnode "$chart" --kube-version 1.31.0)
grep -q "image: \"idemnode:$version\"" <<<"$rendered" || fail "$chart does not render image idemnode:$version"
grep -q "app.kubernetes.io/version: \"$version\"" <<<"$rendered" || fail "$chart does not render appVersion $version"
echo "$chart renders $(grep -c '^kind: ' <<<"$rendered") objects, image idemnode:$version"
echo "release-check passed in $((SECONDS - start))s"
