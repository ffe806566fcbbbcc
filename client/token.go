package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// WithToken returns a dial option that sends token as
// "authorization: Bearer <token>" with every call, for servers that run
// with --auth and a tokens file; the server derives the caller's tenant
// from it. Add it to Config.DialOptions. gRPC refuses to send it over a
// connection without transport security (Config.TransportCredentials), so
// a token never crosses the network in clear text by accident; use
// WithInsecureToken for tests and development on loopback.
func WithToken(token string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(bearerToken{token: token, requireTLS: true})
}

// WithInsecureToken is WithToken that also sends the token over plaintext
// connections. Anyone on the path can read and replay it: use it only in
// tests and development.
func WithInsecureToken(token string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(bearerToken{token: token})
}

// bearerToken is per-RPC credentials carrying one bearer token.
type bearerToken struct {
	token      string
	requireTLS bool
}

var _ credentials.PerRPCCredentials = bearerToken{}

// GetRequestMetadata returns the authorization header of every call.
func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity makes gRPC refuse plaintext connections unless
// the token was given with WithInsecureToken.
func (b bearerToken) RequireTransportSecurity() bool { return b.requireTLS }
