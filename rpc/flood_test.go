package rpc_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The flood's limits: each tenant may store floodKeys records and
// floodBytes bytes, and claim floodRate times a second per node.
const (
	floodKeys  = 40
	floodBytes = 48 << 10
	floodRate  = 100
	floodBurst = 20
)

// floodCluster is three nodes with authentication by bearer tokens
// (noisy's and quiet's), the quotas above and the claim rate on every node.
func floodCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	tokens := testcluster.Tokens(t, map[string]string{"noisy-token-0123456789": "noisy", "quiet-token-0123456789": "quiet"})
	limits := rpc.DefaultLimits()
	limits.TenantMaxKeys, limits.TenantMaxBytes, limits.QuotaRetryAfter = floodKeys, floodBytes, time.Second
	// Plaintext with tokens: nodes forward unary, with the caller's token.
	return testcluster.Start(t, 3, testcluster.Options{Limits: &limits,
		APIOptions: []rpc.Option{rpc.WithUnaryForwarding()},
		ServerOptions: func(*testcluster.Node) []grpc.ServerOption {
			auth, err := rpc.NewAuthenticator(rpc.AuthConfig{Tokens: tokens})
			if err != nil {
				t.Fatal(err)
			}
			rate, err := rpc.NewClaimRateLimit(floodRate, floodBurst) // one bucket table per node
			if err != nil {
				t.Fatal(err)
			}
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(auth.UnaryInterceptor(), rate.UnaryInterceptor()),
				grpc.ChainStreamInterceptor(auth.StreamInterceptor())}
		}})
}

// dialAs connects to every node with token.
func dialAs(t *testing.T, c *testcluster.Cluster, token string) []idempb.IdempotencyClient {
	t.Helper()
	var out []idempb.IdempotencyClient
	for _, nd := range c.Nodes {
		conn, err := grpc.NewClient(nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			client.WithInsecureToken(token))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		out = append(out, idempb.NewIdempotencyClient(conn))
	}
	return out
}

// tally counts a tenant's answers by reason; its first unexpected error
// fails the test.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
	tokens map[string]uint64 // key -> token of each claim won
	bad    error
}

func newTally() *tally { return &tally{counts: map[string]int{}, tokens: map[string]uint64{}} }

// add records an answer: "ok" or the ErrorInfo reason of a
// ResourceExhausted that carries a RetryInfo.
func (ta *tally) add(err error) string {
	what := "ok"
	if err != nil {
		what = limitReason(err)
	}
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.counts[what]++
	if what == "" && ta.bad == nil {
		ta.bad = err
	}
	return what
}

// refusedBoth reports whether the tally holds both limits' refusals.
func (ta *tally) refusedBoth() bool {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return ta.counts[idempb.ReasonRateLimited] > 0 && ta.counts[idempb.ReasonQuotaExceeded] > 0
}

// limitReason returns the reason of a RATE_LIMITED or QUOTA_EXCEEDED
// refusal with a positive retry hint, "" for anything else.
func limitReason(err error) string {
	st, _ := status.FromError(err)
	reason, hint := "", false
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.RetryInfo:
			hint = d.GetRetryDelay().AsDuration() > 0
		}
	}
	if !hint || (reason != idempb.ReasonRateLimited && reason != idempb.ReasonQuotaExceeded) {
		return ""
	}
	return reason
}

// TestFloodedTenantDoesNotStarveOthers floods tenant noisy with claims on
// every node, far past its claim rate and its key quota, then with large
// completions past its byte quota, while tenant quiet claims and completes
// at a modest pace through the same nodes. Every one of quiet's calls
// succeeds; noisy is refused with RATE_LIMITED and QUOTA_EXCEEDED, each
// with a retry hint; every node agrees on what noisy stores, which stays
// within its quotas.
func TestFloodedTenantDoesNotStarveOthers(t *testing.T) {
	rpc.SkipInShort(t, "floods a 3-node cluster past a tenant's rate and quotas")
	t.Parallel()
	c := floodCluster(t)
	noisyAPI, quietAPI := dialAs(t, c, "noisy-token-0123456789"), dialAs(t, c, "quiet-token-0123456789")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	noisy, quiet := newTally(), newTally()
	id := func(key string) *idempb.RecordId { return &idempb.RecordId{Scope: "POST /v1/charges", Key: key} }

	// Phase 1: claims. noisy: 24 callers as fast as they can for 1.5 s, and
	// on until both its limits refused it (at most 15 s): a claim refused
	// for quota goes through Raft, and under the race detector on a loaded
	// machine 6 callers did not reach the rate in 1.5 s.
	var wg sync.WaitGroup
	floodEnd, hardEnd := time.Now().Add(1500*time.Millisecond), time.Now().Add(15*time.Second)
	flooding := func() bool {
		now := time.Now()
		return now.Before(floodEnd) || (now.Before(hardEnd) && !noisy.refusedBoth())
	}
	for w := range 24 {
		wg.Go(func() {
			for i := 0; flooding(); i++ {
				key := fmt.Sprintf("noisy-%d-%d", w, i)
				resp, err := noisyAPI[(w+i)%3].Claim(ctx, &idempb.ClaimRequest{Id: id(key), Owner: "n"})
				if noisy.add(err) == "ok" {
					noisy.mu.Lock()
					noisy.tokens[key] = resp.GetToken()
					noisy.mu.Unlock()
				}
			}
		})
	}
	// quiet: 30 claims, one every 40 ms, completed right away.
	const quietKeys = 30
	for i := range quietKeys {
		key := fmt.Sprintf("quiet-%d", i)
		resp, err := quietAPI[i%3].Claim(ctx, &idempb.ClaimRequest{Id: id(key), Owner: "q"})
		if quiet.add(err); err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_WON {
			t.Fatalf("quiet's claim %d during the flood: %v, %v", i, resp, err)
		}
		quiet.tokens[key] = resp.GetToken()
		time.Sleep(40 * time.Millisecond)
	}
	wg.Wait()
	if noisy.bad != nil {
		t.Fatalf("noisy got an unexpected error: %v", noisy.bad)
	}
	t.Logf("claims: noisy %v, quiet %v", noisy.counts, quiet.counts)
	if noisy.counts["ok"] != floodKeys || noisy.counts[idempb.ReasonRateLimited] == 0 || noisy.counts[idempb.ReasonQuotaExceeded] == 0 {
		t.Fatalf("noisy's claims %v: want exactly %d won, some rate-limited, some over quota", noisy.counts, floodKeys)
	}

	// Phase 2: completions. noisy completes every key with 2 KiB (double
	// its byte quota in all) while quiet completes with small bodies.
	noisyBody, quietBody := bytes.Repeat([]byte("n"), 2<<10), []byte(`{"ok":true}`)
	for key, token := range noisy.tokens {
		wg.Go(func() {
			_, err := noisyAPI[int(token)%3].Complete(ctx, &idempb.CompleteRequest{Id: id(key), Token: token,
				Response: &idempb.Response{Status: 200, Body: noisyBody}})
			noisy.add(err)
		})
	}
	for key, token := range quiet.tokens {
		resp, err := quietAPI[int(token)%3].Complete(ctx, &idempb.CompleteRequest{Id: id(key), Token: token,
			Response: &idempb.Response{Status: 200, Body: quietBody}})
		if err != nil || resp.GetOutcome() != idempb.Outcome_OUTCOME_OK {
			t.Fatalf("quiet's completion of %s during the flood: %v, %v", key, resp, err)
		}
	}
	wg.Wait()
	if noisy.bad != nil {
		t.Fatalf("noisy got an unexpected error: %v", noisy.bad)
	}
	t.Logf("after completions: noisy %v", noisy.counts)

	completedOK := noisy.counts["ok"] - floodKeys // completions that were answered OK
	if completedOK == 0 || completedOK == floodKeys {
		t.Fatalf("noisy completed %d of %d keys, want some refused for bytes", completedOK, floodKeys)
	}
	c.WaitConverged(30 * time.Second)
	for _, nd := range c.Nodes {
		m := nd.Node().Machine()
		n, q := m.Usage("noisy"), m.Usage("quiet")
		if n.Keys != floodKeys || n.Bytes > floodBytes || q.Keys != quietKeys {
			t.Fatalf("%s: noisy stores %+v, quiet %+v; want %d keys within %d bytes, and %d keys", nd.ID, n, q,
				floodKeys, floodBytes, quietKeys)
		}
		stored := 0
		for key := range noisy.tokens {
			if r, ok := m.Get(fsm.RecordKey{Tenant: "noisy", Scope: "POST /v1/charges", Key: key}); ok && r.State == fsm.StateCompleted {
				stored++
			}
		}
		if stored != completedOK {
			t.Fatalf("%s holds %d of noisy's completions, %d were acknowledged", nd.ID, stored, completedOK)
		}
	}
}
