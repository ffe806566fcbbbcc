package client_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestClientSendsNoBandwidthPings: the SDK's connections do not ping the
// server every round trip (gRPC's bandwidth estimator), which the server
// would read and answer. The control is the same claims on a connection
// with gRPC's defaults: it pings.
func TestClientSendsNoBandwidthPings(t *testing.T) {
	t.Parallel()
	c := shared
	ctx := testCtx(t)
	const calls = 50

	sdk := &testutil.PingDialer{}
	cl := newClient(t, c, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(sdk.Dial))
	})
	for i := range calls {
		id := client.ID{Scope: "windows", Key: fmt.Sprint("sdk-", i)}
		if _, err := cl.Claim(ctx, id, []byte("fp")); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	cl.Close()
	sdk.Wait()
	// A keepalive ping comes after 5 s without a frame from the server;
	// the estimator pinged on every claim.
	if got := sdk.ClientPings(); got >= calls/5 {
		t.Fatalf("the SDK sent %d pings over %d claims, want none but a keepalive's", got, calls)
	}

	plain := &testutil.PingDialer{}
	conn, err := grpc.NewClient(c.Nodes[0].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(plain.Dial))
	if err != nil {
		t.Fatal(err)
	}
	api := idempb.NewIdempotencyClient(conn)
	for i := range calls {
		req := &idempb.ClaimRequest{Id: &idempb.RecordId{Scope: "windows", Key: fmt.Sprint("plain-", i)}, Fingerprint: []byte("fp"), Owner: "o"}
		if _, err := api.Claim(ctx, req); err != nil {
			t.Fatalf("plain claim %d: %v", i, err)
		}
	}
	conn.Close()
	plain.Wait()
	if got := plain.ClientPings(); got == 0 {
		t.Fatalf("the control sent no pings over %d claims: the count sees nothing", calls)
	}
}
