package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/proxy"
)

// trickle sends a status with Content-Length: n, then the body one byte
// every gap.
func trickle(w http.ResponseWriter, status, n int, gap time.Duration) {
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(status)
	for range n {
		_, _ = w.Write([]byte("x"))
		_ = http.NewResponseController(w).Flush()
		time.Sleep(gap) // the upstream is slow: what the test is about
	}
}

// breakOff sends a status with Content-Length: 2n and n bytes of the
// body, then drops the connection.
func breakOff(w http.ResponseWriter, status, n int) {
	w.Header().Set("Content-Length", strconv.Itoa(2*n))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(strings.Repeat("x", n)))
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

// problemOf decodes a problem+json answer.
func problemOf(t testing.TB, r reply) (p struct {
	Type           string
	OperationState string `json:"operation_state"`
	Status         int
	SafeNewKey     *bool `json:"safe_new_key"`
}) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("HTTP %d %v %q: want a problem+json body (%v)", r.status, r.header, r.body, err)
	}
	return p
}

// TestProxySlowBodyIsNotCutByHeaderTimeout (finding 2): --upstream-timeout
// bounds the wait for the response headers only. An upstream that answers
// its headers in time and then sends its body a byte at a time, for longer
// than that timeout, reaches the caller whole, and the retry is a replay:
// the upstream runs once.
func TestProxySlowBodyIsNotCutByHeaderTimeout(t *testing.T) {
	t.Parallel()
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		trickle(w, http.StatusCreated, 10, 100*time.Millisecond)
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url(), UpstreamTimeout: 300 * time.Millisecond})
	key := client.NewKey()
	first, err := sendOrFail("POST", base+"/charges", key, `{}`)
	if err != nil || first.status != 201 || first.body != "xxxxxxxxxx" {
		t.Errorf("first: HTTP %d %q (%v), want 201 and the 10 bytes", first.status, first.body, err)
	}
	retry := send(t, "POST", base+"/charges", key, `{}`)
	if retry.status != 201 || retry.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: HTTP %d %v %q, want the replay", retry.status, retry.header, retry.body)
	}
	if n := up.hits.Load(); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
}

// TestProxyBodyTimeoutKeepsKey (finding 2): a body that does not arrive
// within --upstream-body-timeout after a stored status is answered with the
// documented 504 problem, not an empty reply; the operation ran, so the key
// is completed with the not-kept marker and the retry does not reach the
// upstream.
func TestProxyBodyTimeoutKeepsKey(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("x"))
		_ = http.NewResponseController(w).Flush()
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url(), UpstreamTimeout: 5 * time.Second,
		UpstreamBodyTimeout: 500 * time.Millisecond})
	key := client.NewKey()
	first, err := sendOrFail("POST", base+"/charges", key, `{}`)
	if err != nil {
		t.Fatalf("first: %v, want the 504 problem", err)
	}
	p := problemOf(t, first)
	if first.status != 504 || p.Type != idemhttp.ProblemResponseBroken || p.OperationState != idemhttp.StateCompleted || *p.SafeNewKey {
		t.Fatalf("first: HTTP %d %s, want 504 %s, completed, no new key", first.status, first.body, idemhttp.ProblemResponseBroken)
	}
	retry := send(t, "POST", base+"/charges", key, `{}`)
	if retry.status != 201 || retry.header.Get(idemhttp.HeaderNotKept) != "true" || problemType(retry) != idemhttp.ProblemResponseNotKept {
		t.Errorf("retry: HTTP %d %v %s, want 201 not kept", retry.status, retry.header, retry.body)
	}
	if n := up.hits.Load(); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
}

// TestProxyUpstreamBreaksMidBody (finding 9): an upstream that sends its
// status and drops the connection mid-body gives the caller the documented
// 502 problem, not an empty reply. A status the route stores means the
// operation ran: the key keeps the not-kept marker and the retry does not
// reach the upstream. A status it does not store (503) releases the key.
func TestProxyUpstreamBreaksMidBody(t *testing.T) {
	t.Parallel()
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		status, _ := strconv.Atoi(r.URL.Query().Get("status"))
		breakOff(w, status, 3)
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url()})
	for _, tc := range []struct {
		status   int
		released bool
	}{{201, false}, {503, true}} {
		key := client.NewKey()
		path := base + "/charges?status=" + strconv.Itoa(tc.status)
		before := up.hits.Load()
		first, err := sendOrFail("POST", path, key, `{}`)
		if err != nil {
			t.Fatalf("status %d, first: %v, want the 502 problem", tc.status, err)
		}
		if p := problemOf(t, first); first.status != 502 || p.Type != idemhttp.ProblemResponseBroken || *p.SafeNewKey {
			t.Fatalf("status %d, first: HTTP %d %s, want 502 %s", tc.status, first.status, first.body, idemhttp.ProblemResponseBroken)
		}
		retry, _ := sendOrFail("POST", path, key, `{}`)
		hits := up.hits.Load() - before
		switch {
		case tc.released && hits != 2:
			t.Errorf("status %d: the upstream ran %d times over two requests, want 2 (released)", tc.status, hits)
		case !tc.released && (hits != 1 || retry.status != tc.status || retry.header.Get(idemhttp.HeaderNotKept) != "true"):
			t.Errorf("status %d: %d runs, retry HTTP %d %v %s; want 1 run and the not-kept marker", tc.status, hits, retry.status, retry.header, retry.body)
		}
	}
}

// TestProxyStreamingResponseBreaks (findings 2 and 9): a response that
// breaks off after it began to stream (it is over max_response_bytes) can
// no longer become a 502: the caller has its status and part of its body,
// and the proxy cuts the connection so that it never takes the part for
// the whole. The status is stored, so the key keeps the not-kept marker.
func TestProxyStreamingResponseBreaks(t *testing.T) {
	t.Parallel()
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		breakOff(w, http.StatusCreated, 4096)
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url(),
		Routes: routes(t, "routes: [{match: POST /exports, max_response_bytes: 1024}]")})
	key := client.NewKey()
	first, err := sendOrFail("POST", base+"/exports", key, `{}`)
	if err == nil || first.status != 201 || len(first.body) >= 8192 {
		t.Fatalf("first: HTTP %d, %d bytes (%v), want 201 and a body cut short", first.status, len(first.body), err)
	}
	retry := send(t, "POST", base+"/exports", key, `{}`)
	if retry.status != 201 || retry.header.Get(idemhttp.HeaderNotKept) != "true" || up.hits.Load() != 1 {
		t.Fatalf("retry: HTTP %d %v after %d runs, want the not-kept marker after 1", retry.status, retry.header, up.hits.Load())
	}
}

// TestProxyStreamsResponseOverTheLimit (finding 2): a response over
// max_response_bytes streams through the proxy instead of being held
// whole: 256 MiB pass while the heap grows by far less, and the key keeps
// the not-kept marker. Not parallel, so the heap is this test's and its
// cluster's; the heap is sampled while the body passes, up to its last
// MiBs, before the completion (whose store batch is not the proxy's).
func TestProxyStreamsResponseOverTheLimit(t *testing.T) {
	const size = 256 << 20
	chunk := make([]byte, 64<<10)
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Header().Set("Content-Type", "application/octet-stream")
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url()})
	// Collect often, so the garbage of everything else in this process (the
	// cluster's nodes) stays small beside what a held response keeps live.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapInuse
	var got atomic.Int64
	peak := make(chan uint64, 1)
	go func() {
		var top uint64
		for got.Load() < size-(8<<20) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapInuse)
			time.Sleep(2 * time.Millisecond) // the sampling period
		}
		peak <- top
	}()
	key := client.NewKey()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/download", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		got.Store(size)
		t.Fatal(err)
	}
	n, err := io.Copy(countTo{&got}, resp.Body)
	resp.Body.Close()
	got.Store(size)
	grew := int64(<-peak) - int64(baseline)
	if err != nil || n != size || resp.StatusCode != 200 {
		t.Fatalf("HTTP %d, %d bytes (%v), want 200 and %d", resp.StatusCode, n, err, size)
	}
	t.Logf("the heap grew by %d MiB at most (from %d MiB) while %d MiB passed", grew>>20, baseline>>20, size>>20)
	if grew > size/2 {
		t.Errorf("the heap grew by %d MiB while a %d MiB response passed: it was held, not streamed", grew>>20, size>>20)
	}
	retry := send(t, "POST", base+"/download", key, `{}`)
	if retry.status != 200 || retry.header.Get(idemhttp.HeaderNotKept) != "true" || up.hits.Load() != 1 {
		t.Fatalf("retry: HTTP %d %v after %d runs, want the not-kept marker after 1", retry.status, retry.header, up.hits.Load())
	}
}

// countTo is an io.Writer that only counts.
type countTo struct{ n *atomic.Int64 }

func (c countTo) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// TestProxyOwnFailureNeverStored: the proxy's own 504 (no response headers
// within --upstream-timeout) is no answer of the upstream's: it releases
// the key even on a route that stores every status, so the retry reaches
// the upstream instead of a replay of the timeout.
func TestProxyOwnFailureNeverStored(t *testing.T) {
	t.Parallel()
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hang") != "" {
			_, _ = io.Copy(io.Discard, r.Body) // so net/http watches for the proxy closing the connection
			<-r.Context().Done()               // the proxy gives up on it
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url(), UpstreamTimeout: 300 * time.Millisecond,
		Routes: routes(t, "routes: [{match: POST /charges, store: [100-599], fingerprint: {body: none}}]")})
	key := client.NewKey()
	if r := send(t, "POST", base+"/charges", key, `{}`, "X-Hang", "1"); r.status != 504 || problemType(r) != "https://idemnode.io/problems/upstream-failed" {
		t.Fatalf("first: HTTP %d %s, want the 504 upstream-failed problem", r.status, r.body)
	}
	if r := send(t, "POST", base+"/charges", key, `{}`); r.status != 201 || up.hits.Load() != 2 {
		t.Fatalf("retry: HTTP %d %v %s after %d runs, want the upstream's 201 after 2", r.status, r.header, r.body, up.hits.Load())
	}
}
