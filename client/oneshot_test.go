package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/internal/testutil"
)

// TestOneShotTriesTheListInOrder: a OneShot client moves past a node that
// refuses connections to the next listed, and when none answers fails
// within its timeout with a *Failure that names every node, not after
// retrying until the context ends.
func TestOneShotTriesTheListInOrder(t *testing.T) {
	t.Parallel()
	dead, dead2 := testutil.FreeAddr(t), testutil.FreeAddr(t)
	cl := newClient(t, shared, func(c *client.Config) {
		c.Addrs, c.OneShot, c.Timeout = append([]string{dead}, addrs(shared)...), true, 5*time.Second
	})
	id := newID()
	res, err := cl.Claim(testCtx(t), id, []byte("fp"))
	if err != nil || res.Outcome != client.OutcomeWon {
		t.Fatalf("claim past a dead first node = %+v, %v; want won", res, err)
	}

	none := newClient(t, shared, func(c *client.Config) {
		c.Addrs, c.OneShot, c.Timeout = []string{dead, dead2}, true, 2*time.Second
	})
	start := time.Now()
	_, err = none.Get(testCtx(t), id)
	var f *client.Failure
	if !errors.As(err, &f) || f.Kind != client.KindRetry || f.Reason != client.ReasonConnectionRefused ||
		!strings.Contains(f.Message, dead) || !strings.Contains(f.Message, dead2) {
		t.Fatalf("get with no node answering: %v (%+v); want a retryable CONNECTION_REFUSED failure naming both", err, f)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a OneShot call with a 2s timeout took %s", took)
	}
}
