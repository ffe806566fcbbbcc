#!/usr/bin/env bash
# The test suite: vet (of the release and the fault build), then every
# package's tests with the race detector.
# Partition tests need root and iptables; without them they skip and say so.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
go vet ./...
# The fault build (the jepsen harness's nodes: planted bugs, --fault-* flags).
go vet -tags faults ./cluster ./rpc ./cmd/idemnode
# macOS builds too (the README's first command is a Mac user's first step).
GOOS=darwin GOARCH=arm64 go build ./...
go test -race -count=1 -timeout 20m ./... "$@"
# The modules of their own under contrib/ (their dependencies stay out of the
# SDK's go.mod), against real servers: PostgreSQL (throwaway, initdb) and an
# in-process nats-server; and the examples that import them.
for mod in contrib/idempg contrib/idemnats examples/nats-consumer; do
	(cd "$mod" && go vet ./... && go test -race -count=1 -timeout 10m ./...)
done
(cd examples/postgres && go vet ./... && go build -o /dev/null .)
