package proxy_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/proxy"
)

// TestReadiness: /readyz answers 200 while a node of the cluster answers,
// and 503 for a proxy whose cluster is nowhere; /healthz answers either way.
func TestReadiness(t *testing.T) {
	t.Parallel()
	dead, err := client.New(client.Config{Addrs: []string{testutil.FreeAddr(t)}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	for _, tc := range []struct {
		name  string
		cl    *client.Client
		ready int
	}{{"a live cluster", newClient(t), 200}, {"no cluster", dead, 503}} {
		r := proxy.WatchCluster(t.Context(), tc.cl, 200*time.Millisecond, slog.New(slog.DiscardHandler))
		ops := httptest.NewServer(proxy.OpsHandler(prometheus.NewRegistry(), r))
		t.Cleanup(ops.Close)
		testutil.Eventually(t, 10*time.Second, tc.name+": /readyz", func() bool { return status(t, ops.URL+"/readyz") == tc.ready })
		if got := status(t, ops.URL+"/healthz"); got != 200 {
			t.Errorf("%s: /healthz %d", tc.name, got)
		}
	}
}

func status(t *testing.T, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
