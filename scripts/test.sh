#!/usr/bin/env bash
# The test suite: vet, then every package's tests with the race detector.
# Partition tests need root and iptables; without them they skip and say so.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
go vet ./...
go test -race -count=1 -timeout 20m ./... "$@"
