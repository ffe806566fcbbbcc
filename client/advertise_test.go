package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/testaddr"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc"
)

// TestAdvertisedLeaderUnreachable runs a cluster whose nodes advertise
// gRPC addresses the client cannot use, as a compose cluster's container
// names seen from the host: names that do not resolve, or that resolve to
// an address where nothing answers. The nodes themselves resolve the names
// (they forward to each other by them). Every call must still succeed,
// quickly, whether the client lists every node or only a follower.
func TestAdvertisedLeaderUnreachable(t *testing.T) {
	t.Parallel()
	block := testaddr.New(t)
	advertised := func(id string) string { return fmt.Sprintf("%s.invalid:%d", id, testcluster.GRPCPort) }
	nodeNames := testcluster.Names{}
	for i := 1; i <= 3; i++ {
		nodeNames[fmt.Sprintf("node%d.invalid", i)] = block.IP(10 + i)
	}
	c := testcluster.Start(t, 3, testcluster.Options{Addrs: block,
		Tune:       func(cfg *cluster.Config) { cfg.GRPCAdvertise = advertised(cfg.NodeID) },
		APIOptions: []rpc.Option{rpc.WithForwardDialOptions(grpc.WithResolvers(nodeNames))},
	})
	leader := c.WaitLeader(30 * time.Second)
	var follower *testcluster.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			follower = nd
			break
		}
	}

	// A silent address: it accepts connections and never says a word.
	silentIP := block.IP(99)
	silent, err := net.Listen("tcp", net.JoinHostPort(silentIP, fmt.Sprint(testcluster.GRPCPort)))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()
	silentNames := testcluster.Names{}
	for name := range nodeNames {
		silentNames[name] = silentIP
	}

	for _, tc := range []struct {
		name  string
		names testcluster.Names // what the client resolves
		addrs []string
		// via is where the client should end up sending the leader's
		// calls: the listed address where the leader answered, or ""
		// (rotation through the listed nodes, which forward).
		via string
	}{
		{"unresolvable, all listed", testcluster.Names{}, addrs(c), leader.GRPCAddr()},
		{"unresolvable, a follower listed", testcluster.Names{}, []string{follower.GRPCAddr()}, ""},
		{"silent, all listed", silentNames, addrs(c), leader.GRPCAddr()},
		{"silent, a follower listed", silentNames, []string{follower.GRPCAddr()}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := client.New(client.Config{Addrs: tc.addrs, DialOptions: []grpc.DialOption{grpc.WithResolvers(tc.names)}})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			id := newID()
			won, err := cl.Claim(ctx, id, []byte("fp"))
			if err != nil || won.Outcome != client.OutcomeWon {
				t.Fatalf("claim = %+v, %v; want WON", won, err)
			}
			if out, err := cl.Complete(ctx, id, won.Token, client.Response{Status: 201}); err != nil || out != client.OutcomeOK {
				t.Fatalf("complete = %s, %v; want OK", out, err)
			}
			if r, err := cl.Get(ctx, id); err != nil || r.State != client.StateCompleted {
				t.Fatalf("get = %+v, %v; want the completed record", r, err)
			}
			// A stale read may be served by a follower that has not applied
			// the completion yet: only reaching a node matters here.
			if _, err := cl.Get(ctx, id, client.Stale()); err != nil && !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("stale get: %v", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the calls took %s; the advertised address cost more than a probe", took)
			}
			if got := cl.Leader(); got != tc.via {
				t.Errorf("the leader's calls go to %q, want %q", got, tc.via)
			}
		})
	}
}
