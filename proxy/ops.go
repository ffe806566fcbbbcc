package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemnode/idemnode/client"
)

// Readiness says whether the proxy can guard requests: some node of the
// cluster answers.
type Readiness struct{ ready atomic.Bool }

// Ready reports the last probe's answer.
func (r *Readiness) Ready() bool { return r.ready.Load() }

// WatchCluster probes the cluster every interval until ctx ends, with a
// stale read of a key nobody holds (NOT_FOUND is an answer): cheap, served
// by any node, and it fails only when no node answers.
func WatchCluster(ctx context.Context, cl *client.Client, every time.Duration, log *slog.Logger) *Readiness {
	r := &Readiness{}
	probe := client.ID{Scope: "idemnode-proxy", Key: "readiness-probe"}
	check := func() {
		pctx, cancel := context.WithTimeout(ctx, every)
		defer cancel()
		_, err := cl.Get(pctx, probe, client.Stale())
		ok := err == nil || errors.Is(err, client.ErrNotFound)
		if r.ready.Swap(ok) != ok {
			if ok {
				log.Info("proxy ready: a node answers")
			} else {
				log.Warn("proxy not ready: no node answers", "err", err)
			}
		}
	}
	check()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				check()
			}
		}
	}()
	return r
}

// OpsHandler serves the proxy's own /healthz, /readyz and /metrics.
func OpsHandler(reg *prometheus.Registry, r *Readiness) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !r.Ready() {
			http.Error(w, "no idemnode node answers", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}
