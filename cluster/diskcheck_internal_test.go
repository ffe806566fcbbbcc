package cluster

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/errors"
)

// TestFailureAdviceNeverWipesAFullDisk: the advice after a failed write on
// a full disk is to free space, never to wipe the data dir (on a single
// node, or with every disk full, that deletes the data), however the
// error is wrapped.
func TestFailureAdviceNeverWipesAFullDisk(t *testing.T) {
	full := []error{
		fmt.Errorf("store raft log: %w", syscall.ENOSPC),
		errors.Wrap(fmt.Errorf("write x.sst: %w", syscall.ENOSPC), "pebble: flush"),
		errors.New("close a table to ingest: write x.sst: no space left on device"),
		fmt.Errorf("write: %w", syscall.EDQUOT),
	}
	for _, err := range full {
		a := failureAdvice(err)
		if !strings.Contains(a, "free space") || strings.Contains(a, "rejoin") {
			t.Errorf("advice after %v: %q; want free space, no wipe", err, a)
		}
	}
	if a := failureAdvice(errors.New("block checksum mismatch")); !strings.Contains(a, "peers are healthy") {
		t.Errorf("advice after a damaged block: %q", a)
	}
}
