#!/usr/bin/env bash
# Builds the release artifacts of one version from the checked-out commit:
#
#   scripts/release.sh [--no-images] VERSION [DIR]     DIR defaults to dist/
#
# VERSION is vMAJOR.MINOR.PATCH with an optional pre-release (v0.2.0,
# v0.2.0-rc.1): the form Go modules, Helm and image tags all accept. DIR gets
#
#   idemnode_VERSION_OS_ARCH            static binaries for linux/amd64,
#                                       linux/arm64 and darwin/arm64
#   idemnode_VERSION_OS_ARCH.cdx.json   the CycloneDX SBOM of each binary
#   idemnode_VERSION_linux_ARCH.image.tar
#                                       the image idemnode:VERSION (Dockerfile)
#                                       holding that binary, for `docker load`;
#                                       amd64 and arm64 (--no-images: none)
#   idemnode-X.Y.Z.tgz                  the chart, version X.Y.Z (VERSION
#                                       without the v), appVersion VERSION, so
#                                       its default image is idemnode:VERSION
#   SHA256SUMS                          over all of the above (sha256sum -c)
#
# The binaries are reproducible: the same commit and toolchain give the same
# bytes (no paths, no VCS stamp of the go command, no timestamps), and so do
# the SBOMs. The image archives and the chart archive carry build times.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."

usage="usage: scripts/release.sh [--no-images] VERSION [DIR]  (VERSION like v0.2.0 or v0.2.0-rc.1; DIR defaults to dist)"
images=true
if [[ "${1:-}" == --no-images ]]; then
	images=false
	shift
fi
(($# == 1 || $# == 2)) || { echo "$usage" >&2; exit 2; }
version=$1
out=${2:-dist}
# No "+build" metadata: an image tag cannot hold a "+".
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if ! [[ "$version" =~ $semver ]]; then
	echo "release.sh: version \"$version\" is not vMAJOR.MINOR.PATCH[-PRERELEASE] (e.g. v0.2.0, v0.2.0-rc.1)" >&2
	exit 2
fi
if $images && ! docker info >/dev/null 2>&1; then
	echo "release.sh: no Docker engine answers 'docker info', so no image archives; pass --no-images to release without them" >&2
	exit 1
fi
# Replace only an earlier release's output, never a directory of other files.
if [[ -d "$out" && -n "$(ls -A "$out")" && ! -f "$out/SHA256SUMS" ]]; then
	echo "release.sh: $out is not empty and holds no SHA256SUMS: not an earlier release, not replacing it" >&2
	exit 1
fi

# The commit `idemnode version` prints, "-modified" when the tree differs from
# it in any file git does not ignore: what the go command's own VCS stamp says.
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown && -n "$(git status --porcelain)" ]]; then
	commit+=-modified
	echo "release.sh: the tree is not clean, binaries say commit $commit" >&2
fi

rm -rf "$out"
mkdir -p "$out"
start=$SECONDS

# GOFLAGS is set, not inherited: a -tags=faults there must not reach a release.
# GOAMD64 and GOARM64 are pinned so a builder's environment cannot change the bytes.
ldflags="-s -w -X main.version=$version -X main.commit=$commit"
for platform in linux/amd64 linux/arm64 darwin/arm64; do
	os=${platform%/*} arch=${platform#*/}
	bin="$out/idemnode_${version}_${os}_${arch}"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-buildvcs=false \
		go build -trimpath -ldflags="$ldflags" -o "$bin" ./cmd/idemnode
	# The SBOM lists the modules the go command recorded in the binary. No
	# serial number or timestamp, so it is as reproducible as the binary.
	go run github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0 bin -json \
		-noserial -notimestamp -version "$version" -output "$bin.cdx.json" "$bin"
	echo "built $bin and its SBOM"
done

if $images; then
	# Both archives hold the tag idemnode:VERSION, each for its platform; amd64
	# last, so that the tag left on this Docker engine is the amd64 image.
	for arch in arm64 amd64; do
		scripts/docker-image.sh --from "$out/idemnode_${version}_linux_$arch" --platform "linux/$arch" "idemnode:$version"
		docker save -o "$out/idemnode_${version}_linux_$arch.image.tar" "idemnode:$version"
	done
fi

source scripts/helm-install.sh
helm package charts/idemnode --version "${version#v}" --app-version "$version" -d "$out"

(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "release $version (commit $commit) in $out in $((SECONDS - start))s:"
cat "$out/SHA256SUMS"
