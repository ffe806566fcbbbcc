package idemhttp

import (
	"net/http"

	"github.com/idemnode/idemnode/client"
)

// Outcome is how the middleware answered a request it guards.
type Outcome string

const (
	// OutcomeExecuted: the handler ran and its response was stored.
	OutcomeExecuted Outcome = "executed"
	// OutcomeReleased: the handler ran and the key was released (a 5xx, by
	// default), so a retry runs it again.
	OutcomeReleased Outcome = "released"
	// OutcomeUnrecorded: the handler ran and its response was sent, but
	// recording it failed (the cluster was unreachable past FinishTimeout,
	// the lease was lost): a retry may run the handler again.
	OutcomeUnrecorded Outcome = "unrecorded"
	// OutcomeReplayed: the stored response was sent; the handler did not run.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeConflict: the same request is still in flight (409).
	OutcomeConflict Outcome = "conflict"
	// OutcomeMismatch: the key was used with another request (422).
	OutcomeMismatch Outcome = "mismatch"
	// OutcomeExpired: the key's record is a tombstone: the operation ran,
	// or may have, before the TTL ended, and its response is gone (410).
	OutcomeExpired Outcome = "expired"
	// OutcomeLimited: the tenant is over its rate or quota (429).
	OutcomeLimited Outcome = "limited"
	// OutcomeUnavailable: the idempotency service could not be used (503,
	// or 500 when it refused the middleware's credentials).
	OutcomeUnavailable Outcome = "unavailable"
	// OutcomeRefused: the request was refused before the service was asked
	// (a missing or malformed key, no tenant, a body too large).
	OutcomeRefused Outcome = "refused"
)

func executedOutcome(a client.Action) Outcome {
	if a == client.Release {
		return OutcomeReleased
	}
	return OutcomeExecuted
}

func (h *handler) observe(r *http.Request, o Outcome) {
	if h.m.cfg.Observe != nil {
		h.m.cfg.Observe(r, o)
	}
}
