package idemhttp_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

// problemBody is the JSON of a problem answer, as a client reads it.
type problemBody struct {
	Type           string  `json:"type"`
	Status         int     `json:"status"`
	OperationState string  `json:"operation_state"`
	KeyExpiresAt   *string `json:"key_expires_at"`
	SafeNewKey     *bool   `json:"safe_new_key"`
}

func decodeProblem(t *testing.T, r reply) problemBody {
	t.Helper()
	var p problemBody
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("HTTP %d body %q: %v", r.status, r.body, err)
	}
	if p.SafeNewKey == nil {
		t.Fatalf("HTTP %d: no safe_new_key in %s", r.status, r.body)
	}
	if got := r.header.Get("Link"); got != idemhttp.LinkDescribedBy {
		t.Errorf("HTTP %d: Link %q, want %q", r.status, got, idemhttp.LinkDescribedBy)
	}
	return p
}

// TestProblemsSayWhatToDoNext: each problem answer says what became of the
// operation and whether a new key is safe; an in-flight answer says when
// the key expires, a mismatch reveals nothing of the record; a replay says
// when the response was stored.
func TestProblemsSayWhatToDoNext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := serve(t, idemhttp.Config{Wait: 100 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))

	missing := decodeProblem(t, request(t, "POST", srv.URL+"/fast", "", `{}`))
	if missing.Status != 400 || !*missing.SafeNewKey || missing.OperationState != "" {
		t.Errorf("missing key: %+v, want a safe new key and no operation state", missing)
	}

	key := client.NewKey()
	done := make(chan reply, 1)
	go func() { done <- request(t, "POST", srv.URL+"/slow", key, `{"a":1}`) }()
	var held reply
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if held = request(t, "POST", srv.URL+"/slow", key, `{"a":1}`); held.status == http.StatusConflict {
			break
		}
	}
	p := decodeProblem(t, held)
	if held.status != 409 || p.OperationState != idemhttp.StateInProgress || *p.SafeNewKey || p.KeyExpiresAt == nil {
		t.Fatalf("in flight: HTTP %d %+v, want in_progress, no safe new key, and when the key expires", held.status, p)
	}
	if at, err := time.Parse(time.RFC3339Nano, *p.KeyExpiresAt); err != nil || at.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("key_expires_at %q (%v): want about a day from now", *p.KeyExpiresAt, err)
	}
	close(release)
	if first := <-done; first.status != 201 {
		t.Fatalf("first request: HTTP %d", first.status)
	}

	reused := request(t, "POST", srv.URL+"/slow", key, `{"a":2}`)
	p = decodeProblem(t, reused)
	if reused.status != 422 || p.OperationState != idemhttp.StateMismatch || !*p.SafeNewKey || p.KeyExpiresAt != nil {
		t.Errorf("reused key: HTTP %d %+v, want mismatch, a safe new key and nothing of the record", reused.status, p)
	}

	replay := request(t, "POST", srv.URL+"/slow", key, `{"a":1}`)
	at, err := time.Parse(time.RFC3339Nano, replay.header.Get(idemhttp.HeaderCompletedAt))
	if replay.header.Get("Idempotent-Replayed") != "true" || err != nil || time.Since(at) > time.Minute || time.Until(at) > time.Second {
		t.Errorf("replay: %v, completed at %q (%v): want the time it was stored", replay.header, replay.header.Get(idemhttp.HeaderCompletedAt), err)
	}
}
