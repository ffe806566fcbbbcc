package rpc

import (
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestServerSendsNoBandwidthPings: with its fixed flow-control windows the
// server does not ping a client every round trip (gRPC's bandwidth
// estimator), a write and a read it made per few claims. The same claims
// to a server on gRPC's defaults are the control: it pings.
func TestServerSendsNoBandwidthPings(t *testing.T) {
	node := mustNode(t)
	for _, tc := range []struct {
		name      string
		opts      []grpc.ServerOption
		wantPings bool
	}{
		{"ServerOptions", ServerOptions(), false},
		{"gRPC defaults", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := &testutil.PingListener{Listener: inner}
			g := grpc.NewServer(tc.opts...)
			NewServer(node, DefaultLimits(), nil).Register(g)
			go func() { _ = g.Serve(ln) }()
			defer g.Stop()
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			api := idempb.NewIdempotencyClient(conn)
			for i := range 50 {
				req := &idempb.ClaimRequest{Id: rid(fmt.Sprintf("%s-%d", tc.name, i)), Fingerprint: []byte("fp"), Owner: "o"}
				if _, err := api.Claim(testCtx(t), req); err != nil {
					t.Fatalf("claim %d: %v", i, err)
				}
			}
			conn.Close()
			g.Stop()
			ln.Wait()
			if got := ln.ServerPings(); (got > 0) != tc.wantPings {
				t.Fatalf("the server sent %d pings over 50 claims; want pings: %v", got, tc.wantPings)
			}
		})
	}
}

// TestForwardLinkSendsNoBandwidthPings: a follower's link to the leader
// does not ping it every round trip either. The control is the same calls
// on a stream of a connection with gRPC's defaults: it pings.
func TestForwardLinkSendsNoBandwidthPings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		call      func(t *testing.T, addr string, n int)
		wantPings bool
	}{
		{"forward link", func(t *testing.T, addr string, n int) {
			f := &forwarder{}
			defer f.close()
			l, err := f.link(addr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if _, err := l.call(testCtx(t), getCall(fmt.Sprint("k", i))); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
		}, false},
		{"gRPC defaults", func(t *testing.T, addr string, n int) {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			stream, err := idempb.NewForwardClient(conn).Calls(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if err := stream.Send(&idempb.ForwardBatch{Calls: []*idempb.ForwardCall{getCall(fmt.Sprint("k", i))}}); err != nil {
					t.Fatal(err)
				}
				if _, err := stream.Recv(); err != nil {
					t.Fatal(err)
				}
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := &testutil.PingListener{Listener: inner}
			e := &echoLeader{release: make(chan struct{})}
			close(e.release)
			g := grpc.NewServer(ServerOptions()...)
			idempb.RegisterForwardServer(g, e)
			go func() { _ = g.Serve(ln) }()
			defer g.Stop()
			tc.call(t, ln.Addr().String(), 50)
			g.Stop()
			ln.Wait()
			// The link's keepalive pings after a second without a frame from
			// the leader, which a loaded machine may reach once or twice
			// between calls; the estimator pinged on every call.
			got := ln.ClientPings()
			if tc.wantPings && got == 0 || !tc.wantPings && got >= 50/5 {
				t.Fatalf("the client sent %d pings over 50 calls; want pings: %v", got, tc.wantPings)
			}
		})
	}
}
