package idemhttp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// charges is a handler whose answer the request picks: {"amount": 402}
// declines (402), 503 fails transiently, 500 panics, 422 is a validation
// error; anything else is charged (201). It counts its runs.
type charges struct{ runs atomic.Int64 }

func (c *charges) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.runs.Add(1)
	var req struct{ Amount int }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	switch req.Amount {
	case 402:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusPaymentRequired)
		fmt.Fprintf(w, `{"title":"card declined","run":%d}`, n)
	case 422:
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"title":"invalid amount","run":%d}`, n)
	case 503:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"title":"bank unavailable","run":%d}`, n)
	case 500:
		panic("handler bug")
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ch_%d","amount":%d}`, n, req.Amount)
	}
}

func wantStatus(t *testing.T, what string, got reply, status int) {
	t.Helper()
	if got.status != status {
		t.Fatalf("%s: status %d (%s), want %d", what, got.status, got.body, status)
	}
}

func wantProblem(t *testing.T, what string, got reply, status int, typ string) {
	t.Helper()
	wantStatus(t, what, got, status)
	var p struct {
		Type   string
		Status int
	}
	if ct := got.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	if err := json.Unmarshal([]byte(got.body), &p); err != nil || p.Type != typ || p.Status != status {
		t.Errorf("%s: problem %s, want type %s status %d", what, got.body, typ, status)
	}
}

func wantRuns(t *testing.T, h *charges, n int64) {
	t.Helper()
	if got := h.runs.Load(); got != n {
		t.Fatalf("handler ran %d times, want %d", got, n)
	}
}

// TestStatusCodes walks through every answer of the middleware.
func TestStatusCodes(t *testing.T) {
	t.Parallel()
	h := &charges{}
	srv := serve(t, idemhttp.Config{MaxBody: 1024}, h)
	url := srv.URL + "/v1/charges"
	key := client.NewKey

	t.Run("400 missing key", func(t *testing.T) {
		wantProblem(t, "no key", request(t, "POST", url, "", `{"amount":1}`), 400, idemhttp.ProblemMissingKey)
	})
	t.Run("400 malformed key", func(t *testing.T) {
		for _, k := range []string{`"unterminated`, "clé", strings.Repeat("k", 256)} {
			wantProblem(t, fmt.Sprintf("key %.20q", k), request(t, "POST", url, k, `{"amount":1}`), 400, idemhttp.ProblemInvalidKey)
		}
		twice := request(t, "POST", url, "a", `{"amount":1}`, "Idempotency-Key", "b")
		wantProblem(t, "two keys", twice, 400, idemhttp.ProblemInvalidKey)
	})
	t.Run("401 without tenant", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(testCtx(t), "POST", url, strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("no Authorization: %d, want 401", resp.StatusCode)
		}
	})
	t.Run("413 body too large", func(t *testing.T) {
		wantProblem(t, "2 KiB body", request(t, "POST", url, key(), strings.Repeat(" ", 2048)+"{}"), 413, idemhttp.ProblemTooLarge)
	})
	wantRuns(t, h, 0)

	t.Run("201 stored and replayed", func(t *testing.T) {
		k, before := key(), h.runs.Load()
		first := request(t, "POST", url, k, `{"amount":100,"currency":"EUR"}`)
		wantStatus(t, "first", first, 201)
		if first.header.Get("Idempotent-Replayed") != "" {
			t.Errorf("first answer marked as replayed")
		}
		again := request(t, "POST", url, k, `{"currency": "EUR", "amount": 100}`)
		wantStatus(t, "retry", again, 201)
		if again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry = %q (replayed %q), want %q replayed", again.body, again.header.Get("Idempotent-Replayed"), first.body)
		}
		// The draft's quoted form names the same key.
		quoted := request(t, "POST", url, `"`+k+`"`, `{"amount":100,"currency":"EUR"}`)
		if quoted.body != first.body {
			t.Errorf("quoted key = %q, want the replay %q", quoted.body, first.body)
		}
		if h.runs.Load() != before+1 {
			t.Errorf("handler ran %d times, want once", h.runs.Load()-before)
		}
	})
	t.Run("422 key reused with another request", func(t *testing.T) {
		k := key()
		wantStatus(t, "first", request(t, "POST", url, k, `{"amount":100}`), 201)
		wantProblem(t, "other body", request(t, "POST", url, k, `{"amount":200}`), 422, idemhttp.ProblemKeyReused)
		// Another path is another scope: another record, not a reuse.
		wantStatus(t, "same key on another path", request(t, "POST", srv.URL+"/v1/other", k, `{"amount":100}`), 201)
	})
	t.Run("4xx stored", func(t *testing.T) {
		for _, amount := range []int{402, 422} {
			k, before := key(), h.runs.Load()
			body := fmt.Sprintf(`{"amount":%d}`, amount)
			first := request(t, "POST", url, k, body)
			wantStatus(t, "first", first, amount)
			again := request(t, "POST", url, k, body)
			wantStatus(t, "retry", again, amount)
			if again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" || h.runs.Load() != before+1 {
				t.Errorf("%d retry = %q, want the stored %q without running again", amount, again.body, first.body)
			}
		}
	})
	t.Run("5xx released", func(t *testing.T) {
		k, before := key(), h.runs.Load()
		wantStatus(t, "first", request(t, "POST", url, k, `{"amount":503}`), 503)
		again := request(t, "POST", url, k, `{"amount":503}`)
		wantStatus(t, "retry", again, 503)
		if again.header.Get("Idempotent-Replayed") != "" || h.runs.Load() != before+2 {
			t.Errorf("retry after 503 was not run again (%d runs)", h.runs.Load()-before)
		}
	})
	t.Run("GET passes through", func(t *testing.T) {
		before := h.runs.Load()
		request(t, "GET", url, "", `{"amount":1}`)
		request(t, "GET", url, "", `{"amount":1}`)
		if h.runs.Load() != before+2 {
			t.Errorf("GET ran %d times, want 2", h.runs.Load()-before)
		}
	})
}
