package client_test

import (
	"context"
	"errors"
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
	c := testcluster.Start(t, 3, testcluster.Options{Security: sec})
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

	// A OneShot client dials with Config.TLS, and says why a server
	// refused it: with TLS 1.3 the refusal of a missing certificate comes
	// after the handshake, as a cut connection, until Endpoints asks again.
	oneShot := newClient(t, c, func(cfg *client.Config) { cfg.OneShot, cfg.TLS = true, sec.ClientTLS(t) })
	if res, err := oneShot.Claim(testCtx(t), newID(), []byte("fp")); err != nil || res.Outcome != client.OutcomeWon {
		t.Fatalf("OneShot claim over TLS = %+v, %v", res, err)
	}
	noCert := sec.ClientTLS(t)
	noCert.Certificates = nil
	refused := newClient(t, c, func(cfg *client.Config) { cfg.OneShot, cfg.TLS, cfg.Timeout = true, noCert, 3*time.Second })
	_, err = refused.Get(testCtx(t), newID())
	var f *client.Failure
	if !errors.As(err, &f) || f.Reason != client.ReasonClientCertRequired || f.Kind != client.KindDenied {
		t.Errorf("OneShot get without a client certificate: %v (%+v); want CLIENT_CERT_REQUIRED", err, f)
	}
}
