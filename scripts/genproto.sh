#!/usr/bin/env bash
# Regenerates the committed gRPC/protobuf code from rpc/idempb/*.proto, and
# from idem.proto and the paths in rpc/idempb/idem_http.yaml the JSON API's
# gateway (idem.pb.gw.go) and its OpenAPI v2 document (idem.swagger.json).
# Needs protoc (apt-get install protobuf-compiler); installs the Go plugins.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.env"
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler; }
GOBIN="$(go env GOPATH)/bin"
go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@v2.33.0
go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@v2.33.0
PATH="$GOBIN:$PATH" protoc -I rpc/idempb -I /usr/include \
  --go_out=rpc/idempb --go_opt=paths=source_relative \
  --go-grpc_out=rpc/idempb --go-grpc_opt=paths=source_relative \
  rpc/idempb/*.proto
# Only the public services: Forward (forward.proto) is between nodes.
PATH="$GOBIN:$PATH" protoc -I rpc/idempb -I /usr/include \
  --grpc-gateway_out=rpc/idempb --grpc-gateway_opt=paths=source_relative \
  --grpc-gateway_opt=grpc_api_configuration=rpc/idempb/idem_http.yaml \
  --openapiv2_out=rpc/idempb \
  --openapiv2_opt=grpc_api_configuration=rpc/idempb/idem_http.yaml \
  --openapiv2_opt=json_names_for_fields=true,disable_default_errors=false \
  rpc/idempb/idem.proto
