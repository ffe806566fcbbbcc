package client

import (
	"context"
	"time"

	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// AwaitNewLeader asks the node behind admin until it knows a leader other
// than old (the one named to, if given), and returns its status: a
// leadership transfer returns once the old leader has stepped down, a
// moment before the node hears of the new one.
func AwaitNewLeader(ctx context.Context, admin idempb.AdminClient, old, to string) (*idempb.StatusResponse, error) {
	for {
		st, err := admin.Status(ctx, &idempb.StatusRequest{})
		if err != nil {
			return nil, err
		}
		if id := st.GetLeaderId(); id != "" && id != old && (to == "" || id == to) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
