package rpc

import (
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every answered call passes through toStatus; one that succeeded must
// cost it nothing (it cost seven allocations, a tenth of a claim's).
func TestToStatusOfNilAllocatesNothing(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	if n := testing.AllocsPerRun(100, func() {
		if toStatus(nil, log) != nil {
			t.Fatal("toStatus(nil) != nil")
		}
	}); n != 0 {
		t.Fatalf("toStatus(nil) made %v allocations, want 0", n)
	}
	if got := status.Code(toStatus(errLeaderChanged, log)); got != codes.Unavailable {
		t.Fatalf("toStatus(errLeaderChanged) has code %v, want Unavailable", got)
	}
}
