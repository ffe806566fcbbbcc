package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// pool holds a few gRPC connections per node. Client i is pinned to node
// i mod len(addrs) and shares one of that node's connections with the other
// clients pinned there, as the instances of an application would: writes
// that reach a follower are forwarded by it, which is part of what we measure.
type pool struct {
	addrs   []string
	conns   [][]*grpc.ClientConn // [node][k]
	clients [][]idempb.IdempotencyClient
}

func dialPool(addrs []string, perNode int) (*pool, error) {
	p := &pool{addrs: addrs}
	for _, addr := range addrs {
		var conns []*grpc.ClientConn
		var clients []idempb.IdempotencyClient
		for range perNode {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				p.close()
				return nil, fmt.Errorf("dial %s: %w", addr, err)
			}
			conn.Connect() // connect now, not inside the first measured request
			conns = append(conns, conn)
			clients = append(clients, idempb.NewIdempotencyClient(conn))
		}
		p.conns = append(p.conns, conns)
		p.clients = append(p.clients, clients)
	}
	return p, nil
}

// client returns the API client of logical client i.
func (p *pool) client(i int) idempb.IdempotencyClient {
	n := len(p.addrs)
	row := p.clients[i%n]
	return row[(i/n)%len(row)]
}

// leader asks the first node who leads, for the notes of the result.
func (p *pool) leader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := idempb.NewAdminClient(p.conns[0][0]).Status(ctx, &idempb.StatusRequest{})
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return st.GetLeaderId() + " at " + st.GetLeaderAddr()
}

func (p *pool) close() {
	for _, row := range p.conns {
		for _, c := range row {
			c.Close()
		}
	}
}
