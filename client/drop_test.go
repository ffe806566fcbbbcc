package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// dropper performs calls of the chosen methods and then loses their answers
// on the way back, as a broken connection does after the server acted.
type dropper struct {
	// drop decides per call (method and how many calls of it came before).
	drop func(method string, n int) bool

	mu      sync.Mutex
	calls   map[string]int
	dropped int
	// answers keeps every Claim answer the server really sent.
	answers []*idempb.ClaimResponse
}

func (d *dropper) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.calls == nil {
		d.calls = map[string]int{}
	}
	n := d.calls[method]
	d.calls[method]++
	if r, ok := reply.(*idempb.ClaimResponse); ok && err == nil {
		d.answers = append(d.answers, &idempb.ClaimResponse{Outcome: r.GetOutcome(), Token: r.GetToken()})
	}
	if err == nil && d.drop(method, n) {
		d.dropped++
		return status.Error(codes.Unavailable, "answer dropped on the wire by the test")
	}
	return err
}

func (d *dropper) client(t *testing.T) *client.Client {
	return newClient(t, shared, func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(d.intercept))
	})
}

// TestDroppedClaimAnswers: the server grants a claim, the answer is lost
// three times; the retries, with the same owner, get the same WON and
// token, and no other claim ever wins.
func TestDroppedClaimAnswers(t *testing.T) {
	t.Parallel()
	d := &dropper{drop: func(method string, n int) bool { return method == "/idem.v1.Idempotency/Claim" && n < 3 }}
	cl := d.client(t)
	ctx := testCtx(t)
	id := newID()

	got, err := cl.Claim(ctx, id, []byte("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != client.OutcomeWon || d.dropped != 3 || len(d.answers) != 4 {
		t.Fatalf("claim = %+v after %d drops and %d answers; want WON after 3 drops", got, d.dropped, len(d.answers))
	}
	for i, a := range d.answers {
		if a.GetOutcome() != idempb.Outcome_OUTCOME_WON || a.GetToken() != got.Token {
			t.Errorf("server answer %d = %v, want WON with token %d every time", i, a, got.Token)
		}
	}
	rec, err := newClient(t, shared).Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Token != got.Token || rec.Attempt != 1 {
		t.Errorf("record = token %d attempt %d, want token %d attempt 1", rec.Token, rec.Attempt, got.Token)
	}
	other, err := newClient(t, shared).Claim(ctx, id, []byte("fp"))
	if err != nil || other.Outcome != client.OutcomeInProgress {
		t.Errorf("claim by another caller = %+v, %v; want IN_PROGRESS", other, err)
	}
}

// TestDroppedAnswersDo loses every other answer of every call while Do
// runs twenty operations: each function runs once and each key replays
// what it stored.
func TestDroppedAnswersDo(t *testing.T) {
	t.Parallel()
	d := &dropper{drop: func(method string, n int) bool { return n%2 == 0 }}
	cl := d.client(t)
	ctx := testCtx(t)
	var runs atomic.Int64
	ids := make([]client.ID, 20)
	for i := range ids {
		ids[i] = newID()
		res, err := cl.Do(ctx, ids[i], []byte("fp"), func(context.Context) (client.Response, error) {
			runs.Add(1)
			return client.Response{Status: 201, Body: []byte(ids[i].Key)}, nil
		})
		if err != nil || !res.Executed || res.Action != client.Complete {
			t.Fatalf("do %d = %+v, %v; want executed and completed", i, res, err)
		}
	}
	if runs.Load() != int64(len(ids)) || d.dropped < len(ids) {
		t.Fatalf("%d runs for %d keys with %d answers dropped; want one run per key", runs.Load(), len(ids), d.dropped)
	}
	for _, id := range ids {
		res, err := cl.Do(ctx, id, []byte("fp"), func(context.Context) (client.Response, error) {
			t.Errorf("%s ran again", id)
			return client.Response{}, nil
		})
		if err != nil || !res.Replayed || string(res.Response.Body) != id.Key {
			t.Errorf("replay of %s = %+v, %v; want its stored body", id, res, err)
		}
	}
}
