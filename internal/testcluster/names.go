package testcluster

import (
	"fmt"
	"net"

	"google.golang.org/grpc/resolver"
)

// Names resolves host names for gRPC connections in tests without asking
// any DNS server: it knows the names it maps (host to IP) and IP literals,
// and fails every other name the way a lookup of an unknown host fails.
// Add it to a connection with grpc.WithResolvers: it takes the place of
// the "dns" scheme, gRPC's default, for that connection only.
type Names map[string]string

// Build resolves target once; names do not change during a test.
func (n Names) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	host, port, err := net.SplitHostPort(target.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("testcluster.Names: %w", err)
	}
	ip := host
	if net.ParseIP(host) == nil {
		var ok bool
		if ip, ok = n[host]; !ok {
			cc.ReportError(fmt.Errorf("lookup %s: no such host", host))
			return fixed{}, nil
		}
	}
	return fixed{}, cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: net.JoinHostPort(ip, port)}}})
}

// Scheme is gRPC's default scheme, so Names serves targets without one.
func (Names) Scheme() string { return "dns" }

// fixed is a resolution that never changes.
type fixed struct{}

func (fixed) ResolveNow(resolver.ResolveNowOptions) {}
func (fixed) Close()                                {}
