package client_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
)

// TestTLS: against a cluster that requires client certificates, a client
// with TransportCredentials runs Do through leader discovery and forwarding;
// one without them gets nothing.
func TestTLS(t *testing.T) {
	t.Parallel()
	sec := testcluster.NewSecurity(t)
	c := testcluster.Start(t, 3, testcluster.Options{Subnet: 104, Security: sec})
	cl := newClient(t, c, func(cfg *client.Config) {
		cfg.TransportCredentials = credentials.NewTLS(sec.ClientTLS(t))
	})
	res, err := cl.Do(testCtx(t), newID(), []byte("fp"), func(context.Context) (client.Response, error) {
		return client.Response{Status: 201, Body: []byte("ok")}, nil
	})
	if err != nil || string(res.Response.Body) != "ok" {
		t.Fatalf("Do over TLS = %+v, %v", res, err)
	}

	plain := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := plain.Get(ctx, newID()); err == nil {
		t.Fatal("a plaintext client was answered by a TLS cluster")
	}
}
