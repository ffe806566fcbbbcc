package idempg

import (
	"testing"

	"github.com/idemnode/idemnode/rpc"
)

// TestLimitsAreIdemnodes: checkResponse's bounds are the server's defaults,
// so a change there shows here.
func TestLimitsAreIdemnodes(t *testing.T) {
	l := rpc.DefaultLimits()
	if l.MaxHeaders != maxHeaders || l.MaxHeaderBytes != maxHeaderBytes || l.MaxBody != defaultMaxBody {
		t.Fatalf("idemnode's limits: %d headers, %d header bytes, %d body bytes; idempg checks %d, %d, %d",
			l.MaxHeaders, l.MaxHeaderBytes, l.MaxBody, maxHeaders, maxHeaderBytes, defaultMaxBody)
	}
}
