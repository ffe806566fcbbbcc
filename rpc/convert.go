package rpc

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idemnode/idemnode/fsm"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The outcome enums of fsm and idempb are kept in the same order, so the
// conversion is a cast; TestOutcomeNames guards the correspondence.
// outcomeOf maps the state machine's outcomes onto the API's; they share
// their numbers up to OK (QUOTA_EXCEEDED is an error, never an outcome).
func outcomeOf(o fsm.Outcome) idempb.Outcome {
	switch o {
	case fsm.OutcomeExpired:
		return idempb.Outcome_OUTCOME_EXPIRED
	case fsm.OutcomeQuotaExceeded:
		return idempb.Outcome_OUTCOME_UNSPECIFIED // quotaBackend made it an error
	}
	return idempb.Outcome(o)
}

// tombstoneRecordOf is a tombstone as Get and Wait show it: state EXPIRED.
func tombstoneRecordOf(r *fsm.Record) *idempb.Record {
	out := recordOf(r)
	out.State = idempb.State_STATE_EXPIRED
	return out
}

func timestamp(unixNano int64) *timestamppb.Timestamp {
	if unixNano == 0 {
		return nil
	}
	return timestamppb.New(time.Unix(0, unixNano))
}

func responseOf(r *fsm.Response) *idempb.Response {
	if r == nil {
		return nil
	}
	out := &idempb.Response{Status: r.Status, Body: r.Body}
	if len(r.Headers) > 0 {
		out.Headers = make([]*idempb.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = &idempb.Header{Name: h.Name, Value: h.Value}
		}
	}
	return out
}

func recordOf(r *fsm.Record) *idempb.Record {
	if r == nil {
		return nil
	}
	return &idempb.Record{
		Id:             &idempb.RecordId{Tenant: r.Tenant, Scope: r.Scope, Key: r.Key},
		State:          idempb.State(r.State),
		Fingerprint:    r.Fingerprint,
		Token:          r.Token,
		Attempt:        r.Attempt,
		LeaseExpiresAt: timestamp(r.LeaseExpiresAt),
		CreatedAt:      timestamp(r.CreatedAt),
		ExpiresAt:      timestamp(r.ExpiresAt),
		CompletedAt:    timestamp(r.CompletedAt),
		Response:       responseOf(r.Response),
		RecoveryPoint:  recoveryPointOf(r.Checkpoint),
	}
}

func recoveryPointOf(c *fsm.Checkpoint) *idempb.RecoveryPoint {
	if c == nil {
		return nil
	}
	return &idempb.RecoveryPoint{Name: c.Point, Data: c.Data}
}

// claimResponse reveals only what the outcome allows: nothing on MISMATCH,
// the response only on COMPLETED.
func claimResponse(res fsm.Result) *idempb.ClaimResponse {
	out := &idempb.ClaimResponse{Outcome: outcomeOf(res.Outcome)}
	r := res.Record
	if r == nil {
		return out
	}
	switch res.Outcome {
	case fsm.OutcomeWon, fsm.OutcomeInProgress:
		out.Token = r.Token
		out.Attempt = r.Attempt
		out.LeaseExpiresAt = timestamp(r.LeaseExpiresAt)
		out.ExpiresAt = timestamp(r.ExpiresAt)
		if res.Outcome == fsm.OutcomeInProgress {
			out.Token = 0 // the holder's token is the holder's secret
		} else {
			out.RecoveryPoint = recoveryPointOf(r.Checkpoint) // where the new holder resumes
		}
	case fsm.OutcomeCompleted:
		out.Token = r.Token
		out.Attempt = r.Attempt
		out.ExpiresAt = timestamp(r.ExpiresAt)
		out.CompletedAt = timestamp(r.CompletedAt)
		out.Response = responseOf(r.Response)
	case fsm.OutcomeExpired:
		// When it expired, and whether it had completed: all that is left.
		out.ExpiresAt = timestamp(r.ExpiresAt)
		out.CompletedAt = timestamp(r.CompletedAt)
	}
	return out
}
