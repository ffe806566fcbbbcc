package client

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestBackoff: delays grow exponentially up to the cap, stay at or above
// half the minimum, and are jittered.
func TestBackoff(t *testing.T) {
	c, err := New(Config{Addrs: []string{"127.0.0.1:1"}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 12 {
		ceiling := min(200*time.Millisecond, 10*time.Millisecond<<n)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := c.backoff(n)
			if d < 5*time.Millisecond || d > ceiling {
				t.Fatalf("backoff(%d) = %s, want within [5ms, %s]", n, d, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("backoff(%d) took %d distinct values in 200 draws: not jittered", n, len(seen))
		}
	}
}

func TestRetryable(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{live, status.Error(codes.Unavailable, "no leader"), true},
		{live, status.Error(codes.DeadlineExceeded, "attempt timed out"), true},
		{live, status.Error(codes.Canceled, "grpc: the client connection is closing"), true},
		{dead, status.Error(codes.Canceled, "context canceled"), false},
		{dead, status.Error(codes.Unavailable, "no leader"), false},
		{live, status.Error(codes.InvalidArgument, "bad key"), false},
		{live, status.Error(codes.ResourceExhausted, "too many waits"), false},
		{live, errors.New("not a status"), false},
	} {
		if got := retryable(tc.ctx, tc.err); got != tc.want {
			t.Errorf("retryable(%v, ctx err %v) = %v, want %v", tc.err, tc.ctx.Err(), got, tc.want)
		}
	}
}

func TestClassifyTooManyWaits(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "too many waits").WithDetails(&errdetails.ErrorInfo{Reason: ReasonTooManyWaits, Domain: "idemnode.io"})
	if err != nil {
		t.Fatal(err)
	}
	if got := classify(st.Err()); !errors.Is(got, ErrTooManyWaits) || status.Code(got) != codes.ResourceExhausted {
		t.Errorf("classify(TOO_MANY_WAITS) = %v, want ErrTooManyWaits keeping the status", got)
	}
	if got := classify(status.Error(codes.ResourceExhausted, "other")); errors.Is(got, ErrTooManyWaits) {
		t.Errorf("classify(other ResourceExhausted) = %v, want no ErrTooManyWaits", got)
	}
}

// TestCallGivesUpAtDeadline: with nothing listening, calls retry until
// the deadline and then report ErrUnavailable with the last status.
func TestCallGivesUpAtDeadline(t *testing.T) {
	c, err := New(Config{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Get(ctx, ID{Tenant: "t", Scope: "s", Key: "k"})
	if !errors.Is(err, ErrUnavailable) || status.Code(err) != codes.Unavailable {
		t.Errorf("get with nothing listening = %v, want ErrUnavailable wrapping Unavailable", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("gave up after %s, want about the 500ms deadline", elapsed)
	}
}

// TestCallGivesUpAtDeadlineInsideAnAttempt: a node that accepts the
// connection and never answers holds the attempt until the caller's
// deadline. That is as unreachable as a refused connection, and must say
// ErrUnavailable like it: a consumer holds such a message instead of
// handing it back at once (contrib/idemnats).
func TestCallGivesUpAtDeadlineInsideAnAttempt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent: no HTTP/2 settings, no answer
		}
	}()
	c, err := New(Config{Addrs: []string{ln.Addr().String()}, AttemptTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Claim(ctx, ID{Tenant: "t", Scope: "s", Key: "k"}, []byte("fp"))
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("claim of a silent node = %v, want ErrUnavailable", err)
	}
}
