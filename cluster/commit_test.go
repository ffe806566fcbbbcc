package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

func claimCmd(key, owner string) *fsm.Command {
	return &fsm.Command{Type: fsm.TypeClaim, Key: fsm.RecordKey{Tenant: "t", Scope: "s", Key: key},
		Fingerprint: []byte("fp-" + key), Owner: owner, Lease: int64(time.Minute), TTL: int64(time.Hour)}
}

// TestGroupCommitBatchesConcurrentWrites: concurrent callers share log
// entries, each gets its own command's result, tokens stay unique, and a
// contested key still has exactly one winner.
func TestGroupCommitBatchesConcurrentWrites(t *testing.T) {
	t.Parallel()
	n := mustSingleNode(t, nil)
	const fresh, contenders = 300, 30
	before := n.Raft().LastIndex()

	var mu sync.Mutex
	tokens := map[uint64]string{}
	winners := 0
	var wg sync.WaitGroup
	run := func(c *fsm.Command, contested bool) {
		defer wg.Done()
		res, err := n.Apply(context.Background(), c)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			t.Errorf("%s/%s: %v", c.Key.Key, c.Owner, err)
		case contested && res.Outcome == fsm.OutcomeWon:
			winners++
			tokens[res.Record.Token] = c.Key.Key
		case contested && res.Outcome != fsm.OutcomeInProgress:
			t.Errorf("contender %s: outcome %s", c.Owner, res.Outcome)
		case !contested && (res.Outcome != fsm.OutcomeWon || res.Record.Owner != c.Owner || res.Record.RecordKey != c.Key):
			t.Errorf("%s: got %s for %+v, want its own win", c.Key.Key, res.Outcome, res.Record)
		case !contested:
			if other, dup := tokens[res.Record.Token]; dup {
				t.Errorf("token %d given to %s and %s", res.Record.Token, other, c.Key.Key)
			}
			tokens[res.Record.Token] = c.Key.Key
		}
	}
	for i := range fresh {
		wg.Add(1)
		go run(claimCmd(fmt.Sprintf("k%d", i), fmt.Sprintf("o%d", i)), false)
	}
	for i := range contenders {
		wg.Add(1)
		go run(claimCmd("contested", fmt.Sprintf("c%d", i)), true)
	}
	wg.Wait()
	if winners != 1 {
		t.Fatalf("contested key: %d winners, want 1", winners)
	}
	entries := n.Raft().LastIndex() - before
	t.Logf("%d commands in %d log entries", fresh+contenders, entries)
	if entries >= fresh+contenders {
		t.Fatalf("%d commands took %d log entries: nothing was batched", fresh+contenders, entries)
	}
}

// TestGroupCommitSkipsAbandonedCommands: a caller that gave up before its
// command was proposed gets its context's error, and the command is never
// applied.
func TestGroupCommitSkipsAbandonedCommands(t *testing.T) {
	t.Parallel()
	n := mustSingleNode(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := claimCmd("abandoned", "o1")
	if _, err := n.Apply(ctx, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply with a cancelled context: %v, want context.Canceled", err)
	}
	// A later command commits after anything queued before it.
	if _, err := n.Apply(context.Background(), claimCmd("later", "o2")); err != nil {
		t.Fatal(err)
	}
	if r, ok := n.Machine().Get(c.Key); ok {
		t.Fatalf("abandoned command was applied: %+v", r)
	}
}

// TestApplyRefusesBatches: a Batch handed to Apply could be wrapped in the
// committer's own Batch, which no node can apply; it is refused up front.
func TestApplyRefusesBatches(t *testing.T) {
	t.Parallel()
	n := mustSingleNode(t, nil)
	b := &fsm.Command{Type: fsm.TypeBatch, Batch: []*fsm.Command{claimCmd("b1", "o")}}
	if _, err := n.Apply(context.Background(), b); err == nil {
		t.Fatal("Apply took a Batch")
	}
	if _, ok := n.Machine().Get(b.Batch[0].Key); ok {
		t.Fatal("the refused batch was applied")
	}
}
