package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// unanswered is a future raft dropped: its Error never returns.
type unanswered struct{}

func (unanswered) Error() error { select {} }

type answered struct{ err error }

func (a answered) Error() error { return a.err }

// TestAwaitEndsWhenTheNodeStops: a wait on a future raft never answers
// ends with ErrShutdown once the node stops, or with ctx's error; an
// answered future gives its own error.
func TestAwaitEndsWhenTheNodeStops(t *testing.T) {
	n := &Node{stop: make(chan struct{})}
	want := errors.New("from raft")
	if err := n.await(context.Background(), answered{want}); err != want {
		t.Fatalf("answered future: %v, want %v", err, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := n.await(ctx, unanswered{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered future, ended context: %v, want DeadlineExceeded", err)
	}
	got := make(chan error, 1)
	go func() { got <- n.await(context.Background(), unanswered{}) }()
	close(n.stop)
	select {
	case err := <-got:
		if !errors.Is(err, ErrShutdown) {
			t.Fatalf("unanswered future, stopped node: %v, want ErrShutdown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("await still waiting 30 s after the node stopped")
	}
}
