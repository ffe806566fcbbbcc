package idemhttp_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// rawPost sends a POST over a fresh connection and returns the response
// exactly as it came off the wire.
func rawPost(t *testing.T, addr, key, body string) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/things HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer acme\r\nIdempotency-Key: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", addr, key, len(body), body)
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// postTwice sends the same request twice to srv, whose handler counts its
// runs, and checks that it ran once, that the second answer is marked as a
// replay and the first not, and that both are the same on the wire but for
// Date and that mark. It returns both answers.
func postTwice(t *testing.T, srv *httptest.Server, runs *atomic.Int64) (first, replay []byte) {
	t.Helper()
	addr := strings.TrimPrefix(srv.URL, "http://")
	key := client.NewKey()
	first = rawPost(t, addr, key, `{"a":1}`)
	replay = rawPost(t, addr, key, `{"a":1}`)
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
	if !bytes.Contains(replay, []byte("\r\nIdempotent-Replayed: true\r\n")) || bytes.Contains(first, []byte("Idempotent-Replayed")) {
		t.Errorf("Idempotent-Replayed: want it on the replay only:\n%s\n---\n%s", first, replay)
	}
	a, b := withoutLines(first, "Date:"), withoutLines(replay, "Date:", "Idempotent-Replayed:", "Idempotent-Completed-At:")
	if !bytes.Contains(replay, []byte("\r\nIdempotent-Completed-At: ")) {
		t.Errorf("replay does not say when the response was stored:\n%q", replay)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("replay differs from the first answer:\n%q\n---\n%q", a, b)
	}
	return first, replay
}

// withoutLines drops the header lines that start with any of prefixes.
func withoutLines(raw []byte, prefixes ...string) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.Index(data, []byte("\r\n")); i >= 0 {
			return i + 2, data[:i+2], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
next:
	for sc.Scan() {
		for _, p := range prefixes {
			if bytes.HasPrefix(sc.Bytes(), []byte(p)) {
				continue next
			}
		}
		out.Write(sc.Bytes())
	}
	return out.Bytes()
}

// TestReplayIsByteIdentical compares the first answer and its replay as
// they appear on the wire: status line, every header (multi-valued, in
// order, non-canonical names, a sniffed Content-Type) and body, except
// Date and the Idempotent-Replayed marker.
func TestReplayIsByteIdentical(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	srv := serve(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		h := w.Header()
		h.Set("Location", "/v1/things/th_1")
		h.Add("Link", `</a>; rel="a"`)
		h.Add("Link", `</b>; rel="b"`)
		h["x-lowercase-name"] = []string{"kept as written"}
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "<html><body>")
		io.WriteString(w, "created \x00\xff binary-safe")
		io.WriteString(w, "</body></html>")
		h.Set("X-Too-Late", "not sent") // after WriteHeader: not on the wire
	}))
	first, _ := postTwice(t, srv, &runs)
	if bytes.Contains(first, []byte("X-Too-Late")) {
		t.Errorf("a header set after WriteHeader was sent:\n%s", first)
	}
	for _, want := range []string{"HTTP/1.1 201 Created\r\n", "\r\nLink: </a>; rel=\"a\"\r\nLink: </b>; rel=\"b\"\r\n", "\r\nx-lowercase-name: kept as written\r\n",
		"\r\nContent-Type: text/html; charset=utf-8\r\n", "\r\n\r\n<html><body>created \x00\xff binary-safe</body></html>"} {
		if !bytes.Contains(first, []byte(want)) {
			t.Errorf("first answer lacks %q:\n%s", want, first)
		}
	}
}

// TestUnsafeHeadersAreNotReplayed has a handler set headers that could
// split a response: the first answer and the replay are the same, carry
// no injected header, and the completion was stored (the handler ran once).
func TestUnsafeHeadersAreNotReplayed(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	srv := serve(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		h := w.Header()
		h["X-Split"] = []string{"x\r\nSet-Cookie: evil"}
		h["Bad Name"] = []string{"v"}
		h["X-Nul"] = []string{"a\x00b"}
		h["X-Latin1"] = []string{"caf\xe9"}
		h.Set("X-Fine", "ok")
		w.WriteHeader(http.StatusCreated)
	}))
	_, replay := postTwice(t, srv, &runs)
	for _, bad := range []string{"\r\nSet-Cookie", "Bad Name", "X-Nul", "X-Latin1"} {
		if bytes.Contains(replay, []byte(bad)) {
			t.Errorf("replay carries %q:\n%q", bad, replay)
		}
	}
	for _, want := range []string{"\r\nX-Split: x  Set-Cookie: evil\r\n", "\r\nX-Fine: ok\r\n"} {
		if !bytes.Contains(replay, []byte(want)) {
			t.Errorf("replay lacks %q:\n%q", want, replay)
		}
	}
}

// TestConcurrentDuplicates sends 100 identical requests at once: the
// handler runs once and every request gets its body.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const n = 100
	var runs, arrived atomic.Int64
	allIn := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		<-allIn // hold the first run until every duplicate has been sent in
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ch_%d"}`, time.Now().UnixNano())
	})
	m := serve(t, idemhttp.Config{}, handler, idemhttp.WaitFor(time.Minute))
	// Count requests as they arrive, before the middleware sees them.
	front := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == n {
			close(allIn)
		}
		proxyTo(t, m.URL, w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go front.Serve(ln)
	t.Cleanup(func() { front.Close() })

	key := client.NewKey()
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = request(t, "POST", "http://"+ln.Addr().String()+"/v1/charges", key, `{"amount":100}`)
		}()
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times for %d identical requests, want 1", runs.Load(), n)
	}
	replayed := 0
	for i, r := range replies {
		if r.status != 201 || r.body != replies[0].body {
			t.Errorf("request %d = %d %q, want 201 %q", i, r.status, r.body, replies[0].body)
		}
		if r.header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	if replayed != n-1 {
		t.Errorf("%d replays, want %d", replayed, n-1)
	}
}

// proxyTo forwards r to base and copies the answer back.
func proxyTo(t *testing.T, base string, w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, r.Body)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// TestPanicLeavesKeyClaimable: a handler that panics aborts the connection
// and releases the key; the retry runs the handler again.
func TestPanicLeavesKeyClaimable(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	srv := serve(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic("handler bug")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	key := client.NewKey()
	req, _ := http.NewRequestWithContext(testCtx(t), "POST", srv.URL+"/v1/charges", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer acme")
	req.Header.Set("Idempotency-Key", key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("request whose handler panicked = %d, want the connection aborted", resp.StatusCode)
	}
	_, err := newClient(t).Get(testCtx(t), client.ID{Tenant: "acme", Scope: "POST /v1/charges", Key: key})
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("record after the panic: %v, want none (released)", err)
	}
	retry := request(t, "POST", srv.URL+"/v1/charges", key, `{}`)
	if retry.status != 201 || runs.Load() != 2 {
		t.Errorf("retry = %d after %d runs, want 201 after 2", retry.status, runs.Load())
	}
}

// TestInFlight: a duplicate that outwaits WaitFor gets 409 with
// Retry-After; once the first finishes, the retry is a replay.
func TestInFlight(t *testing.T) {
	t.Parallel()
	started, finish := make(chan struct{}), make(chan struct{})
	srv := serve(t, idemhttp.Config{RetryAfter: 2 * time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-finish
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "done")
	}), idemhttp.WaitFor(200*time.Millisecond))
	url, key := srv.URL+"/v1/charges", client.NewKey()
	first := make(chan reply, 1)
	go func() { first <- request(t, "POST", url, key, `{}`) }()
	<-started
	dup := request(t, "POST", url, key, `{}`)
	wantProblem(t, "duplicate in flight", dup, 409, idemhttp.ProblemInFlight)
	if dup.header.Get("Retry-After") != "2" {
		t.Errorf("Retry-After = %q, want 2", dup.header.Get("Retry-After"))
	}
	close(finish)
	if r := <-first; r.status != 201 {
		t.Fatalf("first = %d", r.status)
	}
	if again := request(t, "POST", url, key, `{}`); again.status != 201 || again.body != "done" || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry after completion = %d %q, want the replay", again.status, again.body)
	}
}

// TestKeyOptionalAndDerived: without a key, an optional route runs every
// time; a route that derives keys runs identical requests once.
func TestKeyOptionalAndDerived(t *testing.T) {
	t.Parallel()
	h := &charges{}
	m, err := idemhttp.New(idemhttp.Config{Client: newClient(t), Tenant: idemhttp.BearerTenant})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/optional", m.Handler(h, idemhttp.KeyRequired(false)))
	mux.Handle("/derived", m.Handler(h, idemhttp.DeriveMissingKeys(true)))
	srv := httptestServer(t, mux)

	request(t, "POST", srv+"/optional", "", `{"amount":1}`)
	request(t, "POST", srv+"/optional", "", `{"amount":1}`)
	wantRuns(t, h, 2)

	body := fmt.Sprintf(`{"amount":%d}`, time.Now().UnixNano()%100000+1000)
	first := request(t, "POST", srv+"/derived", "", body)
	again := request(t, "POST", srv+"/derived", "", body)
	wantRuns(t, h, 3)
	if again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("identical request without a key = %q, want the replay of %q", again.body, first.body)
	}
	request(t, "POST", srv+"/derived", "", `{"amount":7}`)
	wantRuns(t, h, 4)
}

// TestTenantsAreSeparate: one key under two tenants is two records.
func TestTenantsAreSeparate(t *testing.T) {
	t.Parallel()
	h := &charges{}
	srv := serve(t, idemhttp.Config{}, h)
	key := client.NewKey()
	a := request(t, "POST", srv.URL+"/v1/charges", key, `{"amount":1}`, "Authorization", "Bearer globex")
	b := request(t, "POST", srv.URL+"/v1/charges", key, `{"amount":2}`)
	if a.status != 201 || b.status != 201 {
		t.Errorf("same key, two tenants = %d and %d, want 201 twice", a.status, b.status)
	}
	wantRuns(t, h, 2)
}

// TestStoreConfigurable stores only 2xx: a 402 is then released.
func TestStoreConfigurable(t *testing.T) {
	t.Parallel()
	h := &charges{}
	srv := serve(t, idemhttp.Config{Store: func(status int) bool { return status < 300 }}, h)
	key := client.NewKey()
	request(t, "POST", srv.URL+"/v1/charges", key, `{"amount":402}`)
	request(t, "POST", srv.URL+"/v1/charges", key, `{"amount":402}`)
	wantRuns(t, h, 2)
}

// TestUnavailable: without the cluster the handler does not run.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	h := &charges{}
	dead, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	srv := serve(t, idemhttp.Config{Client: dead}, h)
	got := request(t, "POST", srv.URL+"/v1/charges", client.NewKey(), `{"amount":1}`)
	wantProblem(t, "cluster unreachable", got, 503, idemhttp.ProblemUnavailable)
	if got.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	wantRuns(t, h, 0)
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return "http://" + ln.Addr().String()
}
