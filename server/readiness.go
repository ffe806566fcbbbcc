package server

import (
	"context"
	"time"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc"
)

// followReadiness keeps the gRPC health service in step with /readyz: a
// node serves once it knows a leader and has applied what it knows to be
// committed.
func followReadiness(ctx context.Context, node *cluster.Node, api *rpc.Server) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		api.SetServing(node.Ready() == nil)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
