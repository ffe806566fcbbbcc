package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testcluster"
)

// TestNoQuorumIsBounded runs one node of a cluster that expects three, so
// there is never a leader, and checks the two ways the package docs give
// to bound how long a request waits before its 503: client.Config.Timeout
// plus Config.Wait, or a deadline on the request's context.
func TestNoQuorumIsBounded(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Options{})
	c.StartNode(c.Nodes[0], 3, []string{c.Nodes[1].GossipAddr(), c.Nodes[2].GossipAddr()})
	alone := []string{c.Nodes[0].GRPCAddr()}
	for _, tc := range []struct {
		name     string
		timeout  time.Duration // client.Config.Timeout
		deadline time.Duration // on the request's context; 0: none
		bound    time.Duration // the docs' promise
	}{
		{"client timeout plus wait", 2 * time.Second, 0, 3 * time.Second},
		{"request deadline", time.Minute, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &charges{}
			m, err := idemhttp.New(idemhttp.Config{Wait: time.Second, Tenant: idemhttp.BearerTenant,
				Client: newClient(t, func(cfg *client.Config) { cfg.Addrs, cfg.Timeout = alone, tc.timeout })})
			if err != nil {
				t.Fatal(err)
			}
			guarded := m.Handler(h)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.deadline > 0 {
					ctx, cancel := context.WithTimeout(r.Context(), tc.deadline)
					defer cancel()
					r = r.WithContext(ctx)
				}
				guarded.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			start := time.Now()
			got := request(t, "POST", srv.URL+"/v1/charges", client.NewKey(), `{"amount":1}`)
			took := time.Since(start)
			wantProblem(t, "no quorum", got, 503, idemhttp.ProblemUnavailable)
			wantRuns(t, h, 0)
			// Slack for the answer's own way back on a shared machine.
			if took > tc.bound+time.Second {
				t.Errorf("the 503 took %s, want at most %s", took, tc.bound)
			}
			t.Logf("503 after %s (bound %s)", took.Round(time.Millisecond), tc.bound)
		})
	}
}
