package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/idemnode/idemnode/fsm"
)

// TestGatherDropsCallersThatGaveUp: a proposal whose caller's context
// ended before it was proposed leaves the batch with its context's error;
// the rest of the queue is batched as usual.
func TestGatherDropsCallersThatGaveUp(t *testing.T) {
	n := &Node{commits: newCommitter()}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	prop := func(ctx context.Context) *proposal {
		return &proposal{ctx: ctx, cmd: &fsm.Command{Type: fsm.TypeExpire}, done: make(chan outcome, 1)}
	}
	first, abandoned, last := prop(context.Background()), prop(gone), prop(context.Background())
	n.commits.queue <- abandoned
	n.commits.queue <- last
	batch := n.gather(first)
	if len(batch) != 2 || batch[0] != first || batch[1] != last {
		t.Fatalf("batch %v, want the first and the last proposal", batch)
	}
	select {
	case o := <-abandoned.done:
		if !errors.Is(o.err, context.Canceled) {
			t.Fatalf("abandoned proposal answered %v, want context.Canceled", o.err)
		}
	default:
		t.Fatal("the abandoned proposal got no answer")
	}
}
