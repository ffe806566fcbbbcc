package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/proxy"
)

// BenchmarkProxy measures what the proxy adds in front of a trivial Go
// upstream (201 and a 40-byte body), from 1 client and from 64 at once,
// every request with a fresh key:
//
//	direct:         the upstream alone
//	claim+complete: the SDK's claim and complete of a fresh key, no HTTP
//	do:             the SDK's Do (claim, lease keeper, complete), no HTTP
//	middleware:     idemhttp around the upstream's handler in one server
//	proxy:          the same requests through the proxy
//
// The proxy's added latency is proxy - direct; the goal is that it adds no
// more than claim+complete. Each reports requests/s and the p50 and p99
// latency of one request.
//
//	go test ./proxy -run XXX -bench Proxy -benchtime 5000x
func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"ord_0123456789","status":"created"}`)
	}))
	defer up.Close()
	cl := newClient(b)
	upURL, _ := url.Parse(up.URL)
	h, err := proxy.New(proxy.Config{Upstream: upURL, Client: cl})
	if err != nil {
		b.Fatal(err)
	}
	px := httptest.NewServer(h)
	defer px.Close()
	m, err := idemhttp.New(idemhttp.Config{Client: cl, Tenant: func(*http.Request) (string, error) { return "", nil }})
	if err != nil {
		b.Fatal(err)
	}
	mw := httptest.NewServer(m.Handler(up.Config.Handler))
	defer mw.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	post := func(base string) func(i int64) error {
		return func(i int64) error {
			req, _ := http.NewRequest("POST", base+"/orders", strings.NewReader(`{"item":"book","qty":1}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", client.NewKey()) // fresh: never a replay
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("HTTP %d", resp.StatusCode)
			}
			return nil
		}
	}
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchPaths(b, clients, post(up.URL), post(mw.URL), post(px.URL), cl)
		})
	}
	b.Run("interleaved", func(b *testing.B) { interleaved(b, post(up.URL), post(mw.URL), post(px.URL), cl) })
}

// interleaved times, from one client, each path in turn (the upstream
// alone, a claim+complete pair, the SDK's Do, idemhttp in the upstream's
// server, the proxy), so all see the same disk and the same machine: a
// commit's latency drifts over a run by more than the proxy adds. It
// reports each path's p50 and p99, and the local cost of the HTTP paths:
// the p50 over the rounds of (path - direct - pair), what they add beyond
// the upstream and one claim and one complete.
func interleaved(b *testing.B, direct, middleware, proxied func(int64) error, cl *client.Client) {
	pair, do := sdkPaths(cl)
	paths := []struct {
		name string
		op   func(int64) error
	}{{"direct", direct}, {"pair", pair}, {"do", do}, {"middleware", middleware}, {"proxy", proxied}}
	lat := make([][]time.Duration, len(paths))
	var mwLocal, pxLocal []time.Duration
	b.ResetTimer()
	for i := range b.N {
		took := make([]time.Duration, len(paths))
		for j, p := range paths {
			start := time.Now()
			if err := p.op(int64(i)); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			took[j] = time.Since(start)
			lat[j] = append(lat[j], took[j])
		}
		mwLocal = append(mwLocal, took[3]-took[0]-took[1])
		pxLocal = append(pxLocal, took[4]-took[0]-took[1])
	}
	ms := func(ds []time.Duration, q int) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)*q/100].Microseconds()) / 1000
	}
	for j, p := range paths {
		b.ReportMetric(ms(lat[j], 50), p.name+"-p50-ms")
		b.ReportMetric(ms(lat[j], 99), p.name+"-p99-ms")
	}
	b.ReportMetric(ms(mwLocal, 50), "middleware-local-p50-ms")
	b.ReportMetric(ms(pxLocal, 50), "proxy-local-p50-ms")
}

func benchPaths(b *testing.B, clients int, direct, middleware, proxied func(int64) error, cl *client.Client) {
	b.Run("direct", func(b *testing.B) { parallel(b, clients, direct) })
	pair, do := sdkPaths(cl)
	b.Run("claim+complete", func(b *testing.B) { parallel(b, clients, pair) })
	b.Run("do", func(b *testing.B) { parallel(b, clients, do) })
	b.Run("middleware", func(b *testing.B) { parallel(b, clients, middleware) })
	b.Run("proxy", func(b *testing.B) { parallel(b, clients, proxied) })
}

// sdkPaths are the SDK's side of a request with a fresh key, without HTTP:
// a claim and a complete, and Do (claim, lease keeper, complete), each
// storing what the upstream answers.
func sdkPaths(cl *client.Client) (pair, do func(int64) error) {
	answer := client.Response{Status: 201, Body: []byte(`{"id":"ord_0123456789","status":"created"}`)}
	pair = func(int64) error {
		id := client.ID{Scope: "bench", Key: client.NewKey()}
		ctx := context.Background()
		res, err := cl.Claim(ctx, id, []byte("fp"))
		if err != nil {
			return err
		}
		_, err = cl.Complete(ctx, id, res.Token, answer)
		return err
	}
	do = func(int64) error {
		id := client.ID{Scope: "bench", Key: client.NewKey()}
		_, err := cl.Do(context.Background(), id, []byte("fp"), func(context.Context) (client.Response, error) {
			return answer, nil
		}, client.WithWait(5*time.Second))
		return err
	}
	return pair, do
}

// parallel runs op b.N times from clients goroutines and reports
// requests/s and the p50 and p99 latency.
func parallel(b *testing.B, clients int, op func(i int64) error) {
	var n atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1024)
			for i := n.Add(1); i <= int64(b.N); i = n.Add(1) {
				t := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
