package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
)

var testSecret = []byte("a test secret of 24 bytes")

type reply struct {
	status int
	header http.Header
	body   string
}

// deliver sends one attempt of an event as a Standard Webhooks sender
// does, signed at ts with sig (the right signature when "").
func deliver(t *testing.T, base, id string, ts time.Time, sig, body string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/hooks", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	if sig == "" {
		sig = sign(testSecret, id, stamp, []byte(body))
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("webhook-id", id)
	}
	req.Header.Set("webhook-timestamp", stamp)
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST /hooks: %v", err)
		return reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func handled(t *testing.T, base, id string) int {
	t.Helper()
	resp, err := http.Get(base + "/events/count?id=" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Count int }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c.Count
}

// TestReceiver runs the example as its doc comment does against a
// three-node cluster: an event delivered 20 times at once, each attempt
// signed at its own second, and once more afterwards, is handled once;
// a forged delivery of its id before it leaves no record; a stale or
// unsigned delivery is 401 and one without webhook-id 400.
func TestReceiver(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	var addrs []string
	for _, nd := range c.Nodes {
		addrs = append(addrs, nd.GRPCAddr())
	}
	listen := testutil.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(testSecret)
	go func() {
		done <- run(ctx, []string{"--cluster", strings.Join(addrs, ","), "--listen", listen}, secret, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	testutil.Eventually(t, 10*time.Second, "the receiver listening", func() bool {
		conn, err := net.Dial("tcp", listen)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	base := "http://" + listen
	id := "msg_" + client.NewKey()
	body := `{"type":"invoice.paid","timestamp":"2026-12-03T08:00:00Z","data":{"id":"in_1"}}`
	now := time.Now()

	if r := deliver(t, base, id, now, "v1,Zm9yZ2Vk", body); r.status != 401 {
		t.Fatalf("a forged delivery: HTTP %d %s, want 401", r.status, r.body)
	}
	replies := make([]reply, 20)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = deliver(t, base, id, now.Add(time.Duration(i)*time.Second), "", body)
		}()
	}
	wg.Wait()
	var answered string
	for i, r := range replies {
		switch {
		case r.status == 409: // still in flight after the wait: the sender retries it
		case r.status != 200 || (answered != "" && r.body != answered):
			t.Errorf("attempt %d: HTTP %d %q, want 200 %q", i, r.status, r.body, answered)
		default:
			answered = r.body
		}
	}
	late := deliver(t, base, id, time.Now(), "", body)
	if late.status != 200 || late.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a redelivery afterwards: HTTP %d %v %s", late.status, late.header, late.body)
	}
	if n := handled(t, base, id); n != 1 {
		t.Fatalf("event %s handled %d times, want 1", id, n)
	}

	stale := "msg_" + client.NewKey()
	if r := deliver(t, base, stale, now.Add(-time.Hour), "", body); r.status != 401 || !strings.Contains(r.body, "more than 5m0s") {
		t.Fatalf("a stale delivery: HTTP %d %s, want 401", r.status, r.body)
	}
	if r := deliver(t, base, "", now, "", body); r.status != 400 || !strings.Contains(r.body, "webhook-id header is missing") {
		t.Fatalf("no webhook-id: HTTP %d %s, want 400 naming it", r.status, r.body)
	}
	if n := handled(t, base, stale); n != 0 {
		t.Fatalf("the stale delivery was handled %d times", n)
	}
}

// TestVerify: a signature among several (a secret being rotated)
// verifies; another secret, body or id does not; nor a bad timestamp.
func TestVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	good := sign(testSecret, "msg_1", ts, []byte(`{}`))
	other := sign([]byte("another secret"), "msg_1", ts, []byte(`{}`))
	for _, tc := range []struct {
		name, id, ts, sigs, body string
		ok                       bool
	}{
		{"the signature", "msg_1", ts, good, `{}`, true},
		{"one of two", "msg_1", ts, other + " " + good, `{}`, true},
		{"another secret", "msg_1", ts, other, `{}`, false},
		{"another body", "msg_1", ts, good, `{"a":1}`, false},
		{"another id", "msg_2", ts, good, `{}`, false},
		{"no timestamp", "msg_1", "", good, `{}`, false},
		{"a future timestamp", "msg_1", strconv.FormatInt(now.Unix()+3600, 10), good, `{}`, false},
	} {
		if err := verify(testSecret, tc.id, tc.ts, tc.sigs, []byte(tc.body), now); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if _, err := parseSecret("not-a-secret"); err == nil {
		t.Error("a secret without whsec_ was accepted")
	}
}
