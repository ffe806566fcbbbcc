package main

import (
	"fmt"
	"testing"

	"github.com/idemnode/idemnode/cluster"
)

// TestStorageFaultExitsThree: a storage fault the node reports (a failed
// snapshot restore's, say) is exit code 3, as serve's own exit on one is.
func TestStorageFaultExitsThree(t *testing.T) {
	err := runtimeError{fmt.Errorf("restore: %w", fmt.Errorf("%w: the store: injected", cluster.ErrStorageFault))}
	if code := exitCodeOf(err); code != exitStorage || exitStorage != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if code := exitCodeOf(runtimeError{fmt.Errorf("listen grpc: refused")}); code != exitFailed {
		t.Errorf("a runtime failure: exit code %d, want %d", code, exitFailed)
	}
}
