package proxy_test

import (
	"context"
	"fmt"
	"maps"
	"path"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/client"
)

// callCounter counts the cluster RPCs a client makes, by method name.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls[path.Base(method)]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts since the last take and starts again from zero.
func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.calls)
	clear(c.calls)
	return out
}

// TestProxyRoundTrips: what the proxy adds to a request, in calls to the
// cluster, is one Claim and one Complete when it runs the upstream, and one
// Claim when it replays; nothing else (no lookup first, no polling). A
// request that runs longer than a third of its lease would also extend it;
// these take milliseconds against the default 30s. docs/PERFORMANCE.md has
// what those calls and the proxy's own hop cost in time.
func TestProxyRoundTrips(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	counter := &callCounter{calls: map[string]int{}}
	base, _ := startProxy(t, shared, up, nil, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(counter.intercept))
	})
	// The first request also finds the leader; count from the second on.
	must(t, "warm-up", send(t, "POST", base+"/charges", client.NewKey(), `{"amount":1}`), 201)
	counter.take()

	const n = 20
	keys := make([]string, n)
	for i := range keys {
		keys[i] = client.NewKey()
		must(t, "fresh key", send(t, "POST", base+"/charges", keys[i], fmt.Sprintf(`{"amount":%d}`, i)), 201)
	}
	if got, want := counter.take(), map[string]int{"Claim": n, "Complete": n}; !maps.Equal(got, want) {
		t.Fatalf("%d requests with fresh keys made the calls %v, want %v", n, got, want)
	}
	for i, key := range keys {
		r := send(t, "POST", base+"/charges", key, fmt.Sprintf(`{"amount":%d}`, i))
		if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %d: HTTP %d, replayed %q", i, r.status, r.header.Get("Idempotent-Replayed"))
		}
	}
	if got, want := counter.take(), map[string]int{"Claim": n}; !maps.Equal(got, want) {
		t.Fatalf("%d replays made the calls %v, want %v", n, got, want)
	}
}
