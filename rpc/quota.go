package rpc

import (
	"context"
	"fmt"
	"github.com/idemnode/idemnode/rpc/idempb"
	"strconv"
	"time"

	"github.com/idemnode/idemnode/fsm"
)

// quotaBackend turns the state machine's QUOTA_EXCEEDED answer into an
// error, so every handler that applies a command (Claim, its waiting
// retries, Complete) answers ResourceExhausted without a branch of its
// own. The outcome has no place in the response messages: a refused call
// stored nothing and its answer is an error the client can back off on.
type quotaBackend struct {
	Backend
	retryAfter time.Duration
}

// Apply applies c and reports a quota refusal as *retryLater.
func (q quotaBackend) Apply(ctx context.Context, c *fsm.Command) (fsm.Result, error) {
	res, err := q.Backend.Apply(ctx, c)
	if err != nil || res.Outcome != fsm.OutcomeQuotaExceeded {
		return res, err
	}
	limit := c.Quota.Keys
	what := "stored records"
	if res.Exceeded == fsm.QuotaBytes {
		limit, what = c.Quota.Bytes, "stored bytes"
	}
	return res, &retryLater{reason: idempb.ReasonQuotaExceeded, after: q.retryAfter,
		msg: fmt.Sprintf("tenant %q is at its quota of %d %s; nothing was stored", c.Key.Tenant, limit, what),
		meta: map[string]string{"tenant": c.Key.Tenant, "quota": res.Exceeded.String(),
			"limit": strconv.FormatUint(limit, 10)}}
}
