package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/proxy"
)

// TestProxyUpstreamKilled: the upstream dies while it runs a request; the
// caller gets 502 and the key is released, so the retry runs once on the
// restarted upstream, and the next retry is a replay.
func TestProxyUpstreamKilled(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	base, _ := startProxy(t, shared, up, nil)
	key := client.NewKey()
	done := make(chan reply, 1)
	go func() { done <- send(t, "POST", base+"/charges?sleep=30", key, `{}`) }()
	waitRuns(t, up, key, 1)
	up.kill()
	must(t, "the request the upstream died in", <-done, 502)
	up.start() // a new process: its counts start at zero
	retry := send(t, "POST", base+"/charges", key, `{}`)
	must(t, "retry", retry, 201)
	again := send(t, "POST", base+"/charges", key, `{}`)
	if again.body != retry.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second retry: %s %v, want the replay of %s", again.body, again.header, retry.body)
	}
	if n := up.runs(key); n != 1 {
		t.Fatalf("the restarted upstream ran the key %d times, want 1", n)
	}
}

// TestProxyLeaderKilled: clients send each key from two senders at once and
// retry until they get an answer, while the cluster's leader is killed;
// every key's upstream call runs exactly once and all its answers agree.
func TestProxyLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: kills the leader of a 3-node cluster under retried requests")
	}
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{})
	up := startUpstream(t)
	base, _ := startProxy(t, c, up, routes(t, "routes: [{match: POST /charges, wait: 10s}]"))
	const keys, senders = 120, 2
	answers := make([][senders]string, keys)
	var sent atomic.Int64
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inner sync.WaitGroup
			work := make(chan int)
			for range 8 {
				inner.Add(1)
				go func() {
					defer inner.Done()
					for k := range work {
						answers[k][s] = untilAnswered(t, base, fmt.Sprintf("leader-killed-%d", k))
						sent.Add(1)
					}
				}()
			}
			for k := range keys {
				work <- k
			}
			close(work)
			inner.Wait()
		}()
	}
	testutil.Eventually(t, time.Minute, "a quarter of the answers before the leader is killed", func() error {
		if n := sent.Load(); n < keys/4 {
			return fmt.Errorf("only %d answers", n)
		}
		return nil
	})
	leader := c.WaitLeader(10 * time.Second)
	c.Crash(leader)
	t.Logf("killed the leader %s after %d answers", leader.ID, sent.Load())
	wg.Wait()
	for k := range keys {
		key := fmt.Sprintf("leader-killed-%d", k)
		if n := up.runs(key); n != 1 {
			t.Errorf("%s ran %d times, want 1", key, n)
		}
		var a struct{ Count int }
		if answers[k][0] != answers[k][1] || json.Unmarshal([]byte(answers[k][0]), &a) != nil || a.Count != 1 {
			t.Errorf("%s: answers %q and %q, want the same first run", key, answers[k][0], answers[k][1])
		}
	}
}

// untilAnswered sends a request until the proxy answers 201, retrying the
// answers that invite a retry (409 in flight, 503 no service), for up to a
// minute; it returns the body.
func untilAnswered(t testing.TB, base, key string) string {
	deadline := time.Now().Add(time.Minute)
	for {
		r := send(t, "POST", base+"/charges?sleep=0.05", key, `{"amount":1}`)
		switch {
		case r.status == 201:
			return r.body
		case (r.status == 409 || r.status == 503) && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond)
		default:
			t.Errorf("%s: HTTP %d %s", key, r.status, r.body)
			return ""
		}
	}
}

// TestProxyCallerGivesUp: a caller that times out before the upstream
// answers does not cut the upstream off: its answer is stored, and the
// caller's retry gets it without a second run.
func TestProxyCallerGivesUp(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	base, _ := startProxy(t, shared, up, nil)
	key := client.NewKey()
	giveUp(t, base+"/charges?sleep=1.5", key, func() bool { return up.runs(key) == 1 })
	retry := send(t, "POST", base+"/charges?sleep=1.5", key, `{}`)
	if retry.status != 201 || retry.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: HTTP %d %v %s, want the first run's answer replayed", retry.status, retry.header, retry.body)
	}
	if n := up.runs(key); n != 1 {
		t.Fatalf("the upstream ran %d times, want 1", n)
	}
}

// TestProxyCallerGoneKeepsLease (finding 2, the caller gone): a caller
// that gives up does not end the claim's lease while the upstream still
// works: the proxy keeps extending it, so no retry takes the key over and
// runs the upstream a second time; the answer, when it comes, is stored.
func TestProxyCallerGoneKeepsLease(t *testing.T) {
	t.Parallel()
	answer := make(chan struct{})
	var once sync.Once
	respond := func() { once.Do(func() { close(answer) }) }
	up := startGoUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-answer
		w.WriteHeader(http.StatusCreated)
	})
	base, _ := startProxyTo(t, shared, proxy.Config{Upstream: up.url(),
		Routes: routes(t, "routes: [{match: POST /charges, lease: 1s, wait: 100ms}]")})
	// Registered after the servers, so it runs before they close: a test
	// that fails early must not leave the handler blocked.
	t.Cleanup(respond)
	key := client.NewKey()
	giveUp(t, base+"/charges", key, func() bool { return up.hits.Load() == 1 })
	left := time.Now()
	cl, id := newClient(t), client.ID{Scope: "POST /charges", Key: key}
	var last client.Record
	testutil.Eventually(t, 10*time.Second, "the lease extended to three leases past the caller's departure", func() bool {
		rec, err := cl.Get(t.Context(), id)
		if err == nil {
			last = *rec
		}
		return err == nil && rec.State == client.StatePending && rec.LeaseExpiresAt.After(left.Add(3*time.Second))
	})
	if dup := send(t, "POST", base+"/charges", key, `{}`); dup.status != 409 {
		respond()
		t.Fatalf("a retry while the upstream works: HTTP %d %s (record %+v), want 409", dup.status, dup.body, last)
	}
	respond()
	testutil.Eventually(t, 10*time.Second, "the answer stored", func() bool {
		rec, err := cl.Get(t.Context(), id)
		return err == nil && rec.State == client.StateCompleted
	})
	if r := send(t, "POST", base+"/charges", key, `{}`); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" || up.hits.Load() != 1 {
		t.Fatalf("retry: HTTP %d %v after %d runs, want the replay after 1", r.status, r.header, up.hits.Load())
	}
}

// giveUp sends a POST with key from a caller that gives up once reached
// says the upstream has the request, before it answers. Leaving at a fixed
// time instead flaked on a loaded machine: the caller could leave before the
// claim was made, and then no upstream ran at all.
func giveUp(t testing.TB, url, key string, reached func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", key)
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the impatient caller got HTTP %d, want to leave first", resp.StatusCode)
		}
		answered <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the upstream has the request", reached)
	cancel()
	if err := <-answered; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
