module github.com/idemnode/idemnode/examples/nats-consumer

go 1.26.0

toolchain go1.27.3

replace (
	github.com/idemnode/idemnode => ../..
	github.com/idemnode/idemnode/contrib/idemnats => ../../contrib/idemnats
)

require (
	github.com/idemnode/idemnode v0.0.0-00010101000000-000000000000
	github.com/idemnode/idemnode/contrib/idemnats v0.0.0-00010101000000-000000000000
	github.com/nats-io/nats.go v1.56.0
)

require (
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.33.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
