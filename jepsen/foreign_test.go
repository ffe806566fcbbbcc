package main

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestForeignKeysCoverTheRestOfTheRun: the other cluster's records are for
// the workload's own keys, from the key set in use now to past the one the
// run's pace reaches at its end, each key once, at most foreignRecords.
func TestForeignKeysCoverTheRestOfTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := &keySpace{hot: 4, opsPerGen: 120}
	keys.ops.Store(1200) // key set 10, after 10 s: 120 ops/s
	n := &nemesis{keys: keys, clock: func() int64 { return int64(10 * time.Second) }}
	got := n.foreignKeys(ctx)
	// 20 s more at 1.5 × 120 ops/s is 30 key sets: 10 through about 41.
	if len(got) < 4*30 || len(got) > 4*33 {
		t.Fatalf("%d keys, want every key of about 32 key sets: %v", len(got), got)
	}
	if got[0] != keyName(10, 0) {
		t.Errorf("first key %s, want %s (the key set in use)", got[0], keyName(10, 0))
	}
	seen := map[string]bool{}
	for _, k := range got {
		if seen[k] {
			t.Errorf("key %s twice", k)
		}
		seen[k] = true
	}

	keys.ops.Store(120 * 1000) // a fast run: more key sets ahead than records
	spread := n.foreignKeys(ctx)
	if len(spread) != foreignRecords {
		t.Fatalf("%d keys, want %d", len(spread), foreignRecords)
	}
	// 20 s more at 1.5 × 12 000 ops/s is 3 000 key sets, 400 keys spread
	// over them.
	var lastGen, lastKey int
	if _, err := fmt.Sscanf(spread[len(spread)-1], "g%d-k%d", &lastGen, &lastKey); err != nil {
		t.Fatal(err)
	}
	if spread[0] != keyName(1000, 0) || lastGen < 3950 {
		t.Errorf("keys %s..%s, want key sets 1000 to about 4000", spread[0], spread[len(spread)-1])
	}
}
