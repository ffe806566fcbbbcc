#!/usr/bin/env bash
# Regenerates the committed gRPC/protobuf code from rpc/idempb/*.proto.
# Needs protoc (apt-get install protobuf-compiler); installs the Go plugins.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler; }
GOBIN="$(go env GOPATH)/bin"
go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PATH="$GOBIN:$PATH" protoc -I rpc/idempb -I /usr/include \
  --go_out=rpc/idempb --go_opt=paths=source_relative \
  --go-grpc_out=rpc/idempb --go-grpc_opt=paths=source_relative \
  rpc/idempb/*.proto
