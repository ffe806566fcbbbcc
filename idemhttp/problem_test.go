package idemhttp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/idemhttp"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc"
)

// problemBody is the JSON of a problem answer, as a client reads it.
type problemBody struct {
	Type           string  `json:"type"`
	Title          string  `json:"title"`
	Status         int     `json:"status"`
	Detail         string  `json:"detail"`
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
	release, running := make(chan struct{}), make(chan struct{}, 1)
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	srv := serve(t, idemhttp.Config{Wait: 100 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case running <- struct{}{}:
			default:
			}
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(free) // before the server closes, which waits for the handler

	missing := decodeProblem(t, request(t, "POST", srv.URL+"/fast", "", `{}`))
	if missing.Status != 400 || !*missing.SafeNewKey || missing.OperationState != "" {
		t.Errorf("missing key: %+v, want a safe new key and no operation state", missing)
	}

	key := client.NewKey()
	done := make(chan reply, 1)
	go func() { done <- request(t, "POST", srv.URL+"/slow", key, `{"a":1}`) }()
	<-running // the first request holds the key: the next are duplicates
	var held reply
	testutil.Eventually(t, 30*time.Second, "a duplicate answered 409 while the first request holds the key", func() error {
		if held = request(t, "POST", srv.URL+"/slow", key, `{"a":1}`); held.status != http.StatusConflict {
			return fmt.Errorf("HTTP %d %s", held.status, held.body)
		}
		return nil
	})
	p := decodeProblem(t, held)
	if held.status != 409 || p.OperationState != idemhttp.StateInProgress || *p.SafeNewKey || p.KeyExpiresAt == nil {
		t.Fatalf("in flight: HTTP %d %+v, want in_progress, no safe new key, and when the key expires", held.status, p)
	}
	if at, err := time.Parse(time.RFC3339Nano, *p.KeyExpiresAt); err != nil || at.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("key_expires_at %q (%v): want about a day from now", *p.KeyExpiresAt, err)
	}
	free()
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

// shortTTLNode starts a one-node cluster that grants TTLs and leases from
// 100ms and keeps tombstones for tombstoneTTL (0: none), and returns a
// client of it.
func shortTTLNode(t *testing.T, tombstoneTTL time.Duration) *client.Client {
	t.Helper()
	limits := rpc.DefaultLimits()
	limits.MinTTL, limits.MinLease, limits.TombstoneTTL = 100*time.Millisecond, 100*time.Millisecond, tombstoneTTL
	c := testcluster.Start(t, 1, testcluster.Options{Limits: &limits,
		// One node: bootstrap alone (bootstrap-expect needs two or more).
		Tune: func(cfg *cluster.Config) { cfg.Bootstrap, cfg.Join = true, nil }})
	cl, err := client.New(client.Config{Addrs: []string{c.Nodes[0].GRPCAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestExpiredKeyIsGone: on a cluster that keeps tombstones, a retry after
// the key's TTL is 410 Gone, saying when the operation's record expired,
// that it completed, and that a new key is not safe; the handler does not
// run again.
func TestExpiredKeyIsGone(t *testing.T) {
	t.Parallel()
	cl := shortTTLNode(t, time.Hour)
	var runs atomic.Int64
	srv := serve(t, idemhttp.Config{Client: cl, TTL: 200 * time.Millisecond, Lease: 150 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.WriteHeader(http.StatusCreated)
		}))
	key := client.NewKey()
	if r := request(t, "POST", srv.URL+"/charges", key, `{"amount":1}`); r.status != 201 {
		t.Fatalf("first request: HTTP %d", r.status)
	}
	time.Sleep(300 * time.Millisecond)
	gone := request(t, "POST", srv.URL+"/charges", key, `{"amount":1}`)
	p := decodeProblem(t, gone)
	if gone.status != http.StatusGone || p.Type != idemhttp.ProblemExpired || p.OperationState != idemhttp.StateExpired ||
		*p.SafeNewKey || p.KeyExpiresAt == nil {
		t.Fatalf("late retry: HTTP %d %s", gone.status, gone.body)
	}
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}
