package idemhttp_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testutil"
)

// TestCallerGoneKeepsLease: when the caller leaves, the handler's context
// is cancelled, as net/http's is, but the claim's lease is still extended
// while the handler finishes: no retry takes the key over meanwhile, and
// what the handler answers is stored.
func TestCallerGoneKeepsLease(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	reached, finish := make(chan struct{}), make(chan struct{})
	srv := serve(t, idemhttp.Config{Lease: time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		close(reached)
		<-r.Context().Done() // the caller left
		<-finish
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(func() {
		select {
		case <-finish:
		default:
			close(finish)
		}
	})
	key := client.NewKey()
	// The caller leaves once the handler has its request: leaving at a
	// fixed time flaked on a loaded machine, before the claim was made.
	ctx, leave := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/charges", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer acme")
	req.Header.Set("Idempotency-Key", key)
	go func() { <-reached; leave() }()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the impatient caller got HTTP %d, want to have left first", resp.StatusCode)
	}
	left := time.Now()
	cl, id := newClient(t), client.ID{Tenant: "acme", Scope: "POST /v1/charges", Key: key}
	testutil.Eventually(t, 10*time.Second, "the lease extended to three leases past the caller's departure", func() bool {
		rec, err := cl.Get(t.Context(), id)
		return err == nil && rec.State == client.StatePending && rec.LeaseExpiresAt.After(left.Add(3*time.Second))
	})
	close(finish)
	testutil.Eventually(t, 10*time.Second, "the answer stored", func() bool {
		rec, err := cl.Get(t.Context(), id)
		return err == nil && rec.State == client.StateCompleted
	})
	if r := request(t, "POST", srv.URL+"/v1/charges", key, `{}`); r.status != 201 || runs.Load() != 1 {
		t.Fatalf("retry: HTTP %d after %d runs, want 201 after 1", r.status, runs.Load())
	}
}
