package idemhttp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// TestResponseTooLargeRunsOnce: a response the service cannot store (a
// body over MaxStoredBody, more headers than it keeps) reaches the caller
// whole; what is stored is a marker, so a retry is told that the operation
// ran and how it ended, and the handler never runs again.
func TestResponseTooLargeRunsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
	}{
		{"a body over the limit", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(strings.Repeat("x", 2048)))
		}},
		{"more headers than kept", func(w http.ResponseWriter) {
			for i := range 70 {
				w.Header().Set(fmt.Sprintf("X-H%d", i), "v")
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte("ok"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			srv := serve(t, idemhttp.Config{MaxStoredBody: 1024}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				tc.write(w)
			}))
			url, key := srv.URL+"/v1/exports", client.NewKey()
			first := request(t, "POST", url, key, `{}`)
			if first.status != http.StatusCreated || first.header.Get(idemhttp.HeaderNotKept) != "" ||
				(tc.name == "a body over the limit" && len(first.body) != 2048) {
				t.Fatalf("first answer: %d, %d bytes, header %v", first.status, len(first.body), first.header)
			}
			for range 2 {
				retry := request(t, "POST", url, key, `{}`)
				var p struct{ Type, Detail string }
				if retry.status != http.StatusCreated || retry.header.Get("Idempotent-Replayed") != "true" ||
					retry.header.Get(idemhttp.HeaderNotKept) != "true" ||
					json.Unmarshal([]byte(retry.body), &p) != nil || p.Type != idemhttp.ProblemResponseNotKept {
					t.Fatalf("retry: %d %v %s", retry.status, retry.header, retry.body)
				}
			}
			if runs.Load() != 1 {
				t.Fatalf("the handler ran %d times, want once", runs.Load())
			}
		})
	}
}

// TestMaxStoredBodyBounded: a MaxStoredBody the service would refuse to
// store is refused at New, not found out by running a handler twice.
func TestMaxStoredBodyBounded(t *testing.T) {
	_, err := idemhttp.New(idemhttp.Config{Client: newClient(t), Tenant: idemhttp.BearerTenant, MaxStoredBody: 2 << 20})
	if err == nil || !strings.Contains(err.Error(), "MaxStoredBody") {
		t.Fatalf("New with a 2 MiB MaxStoredBody: %v, want an error", err)
	}
}

// TestObserve: each guarded request is reported once, with how it was
// answered.
func TestObserve(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[idemhttp.Outcome]int{}
	srv := serve(t, idemhttp.Config{Observe: func(_ *http.Request, o idemhttp.Outcome) {
		mu.Lock()
		seen[o]++
		mu.Unlock()
	}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	key := client.NewKey()
	request(t, "POST", srv.URL+"/ok", key, `{"a":1}`)
	request(t, "POST", srv.URL+"/ok", key, `{"a":1}`)
	request(t, "POST", srv.URL+"/ok", key, `{"a":2}`)
	request(t, "POST", srv.URL+"/fail", client.NewKey(), `{}`)
	request(t, "POST", srv.URL+"/ok", "", `{}`)
	request(t, "GET", srv.URL+"/ok", "", ``) // not guarded: not reported
	mu.Lock()
	defer mu.Unlock()
	want := map[idemhttp.Outcome]int{idemhttp.OutcomeExecuted: 1, idemhttp.OutcomeReplayed: 1, idemhttp.OutcomeMismatch: 1,
		idemhttp.OutcomeReleased: 1, idemhttp.OutcomeRefused: 1}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("observed %v, want %v", seen, want)
	}
}

// TestBrokenAfterStatusKeepsKey (findings 2 and 9): once the handler wrote
// a status that is stored, the operation ran: when its response then
// breaks (the handler panics, or reports it with ResponseBroken), the key
// keeps the not-kept marker and the handler never runs again. A caller
// that got nothing yet gets the 502 problem (ResponseBroken), or the
// aborted connection of a panic; a status that is not stored releases the
// key as before.
func TestBrokenAfterStatusKeepsKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		panics bool
		kept   bool
	}{
		{"panic after 201", http.StatusCreated, true, true},
		{"broken after 201", http.StatusCreated, false, true},
		{"broken after 503", http.StatusServiceUnavailable, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			srv := serve(t, idemhttp.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.WriteHeader(tc.status)
				w.Write([]byte("part of it"))
				if tc.panics {
					panic("handler bug after its status")
				}
				if !idemhttp.ResponseBroken(w, errors.New("the dependency hung up")) {
					t.Error("ResponseBroken did not find the middleware's recorder")
				}
			}))
			url, key := srv.URL+"/v1/charges", client.NewKey()
			req, _ := http.NewRequestWithContext(testCtx(t), "POST", url, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer acme")
			req.Header.Set("Idempotency-Key", key)
			resp, err := http.DefaultClient.Do(req)
			switch {
			case tc.panics && err == nil:
				resp.Body.Close()
				t.Fatalf("first: HTTP %d, want the connection aborted by the panic", resp.StatusCode)
			case !tc.panics && err != nil:
				t.Fatalf("first: %v, want the 502 problem", err)
			case !tc.panics:
				var p struct {
					Type           string
					OperationState string `json:"operation_state"`
				}
				json.NewDecoder(resp.Body).Decode(&p)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadGateway || p.Type != idemhttp.ProblemResponseBroken || (p.OperationState == idemhttp.StateCompleted) != tc.kept {
					t.Fatalf("first: HTTP %d %+v, want 502 %s, completed %v", resp.StatusCode, p, idemhttp.ProblemResponseBroken, tc.kept)
				}
			}
			retry := request(t, "POST", url, key, `{}`)
			if tc.kept && (runs.Load() != 1 || retry.status != tc.status || retry.header.Get(idemhttp.HeaderNotKept) != "true") {
				t.Fatalf("retry: HTTP %d %v after %d runs, want %d not kept after 1", retry.status, retry.header, runs.Load(), tc.status)
			}
			if !tc.kept && runs.Load() != 2 {
				t.Fatalf("retry: %d runs, want 2 (released)", runs.Load())
			}
		})
	}
}
