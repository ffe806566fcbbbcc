package client

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// ID addresses a record: the tenant that owns the key, the scope (the
// operation family, typically "METHOD path") and the Idempotency-Key.
// Against a server with authentication on, leave Tenant empty (the server
// fills in the tenant of the caller's credentials) or name that tenant;
// another tenant is refused with PermissionDenied.
type ID struct {
	Tenant string
	Scope  string
	Key    string
}

// String returns tenant/scope/key for messages.
func (id ID) String() string { return id.Tenant + "/" + id.Scope + "/" + id.Key }

func (id ID) proto() *idempb.RecordId {
	return &idempb.RecordId{Tenant: id.Tenant, Scope: id.Scope, Key: id.Key}
}

// Outcome is the answer of the state machine to one operation.
type Outcome int

// The outcomes, with the same values as idem.v1's Outcome.
const (
	OutcomeUnspecified Outcome = iota
	OutcomeWon
	OutcomeInProgress
	OutcomeCompleted
	OutcomeMismatch
	OutcomeFenced
	OutcomeNotFound
	OutcomeOK
	// OutcomeExpired: the key's record is a tombstone (the server keeps
	// one after the TTL with --tombstone-ttl): the operation ran, or may
	// have, and its response is gone. Do not run it again.
	OutcomeExpired
)

var outcomeNames = [...]string{"unspecified", "won", "in_progress", "completed", "mismatch", "fenced", "not_found", "ok", "expired"}

// String returns the lower-case name of the outcome.
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// State is a record's state.
type State int

// The record states, with the same values as idem.v1's State.
const (
	StateUnspecified State = iota
	StatePending
	StateCompleted
	// StateExpired is a tombstone: Record.CompletedAt is set when it
	// completed; without it, it expired PENDING and its outcome is unknown.
	StateExpired
)

// String returns "pending", "completed" or "expired".
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateCompleted:
		return "completed"
	case StateExpired:
		return "expired"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Header is one response header; a Response keeps them in order and may
// hold a name more than once.
type Header struct {
	Name  string
	Value string
}

// Response is what the holder produced, replayed byte for byte.
type Response struct {
	Status  int
	Headers []Header
	Body    []byte
}

// Record is a record as Get and Wait return it.
type Record struct {
	ID             ID
	State          State
	Fingerprint    []byte
	Token          uint64
	Attempt        uint32
	LeaseExpiresAt time.Time
	CreatedAt      time.Time
	ExpiresAt      time.Time
	CompletedAt    time.Time
	// Response is set on a COMPLETED record.
	Response *Response
	// RecoveryPoint is the last checkpoint of a PENDING record, if any.
	RecoveryPoint *RecoveryPoint
}

// RecoveryPoint is a step of a multi-step operation its holder recorded as
// done (Checkpoint), and the data resuming after it needs.
type RecoveryPoint struct {
	Name string
	Data []byte
}

// ClaimResult is the answer to Claim.
type ClaimResult struct {
	Outcome Outcome
	// Token is the fencing token on WON and COMPLETED.
	Token   uint64
	Attempt uint32
	// LeaseExpiresAt is set on WON and IN_PROGRESS.
	LeaseExpiresAt time.Time
	ExpiresAt      time.Time
	// Response is the stored response on COMPLETED, and CompletedAt when
	// it was stored.
	Response    *Response
	CompletedAt time.Time
	// Owner is the nonce the claim was sent with.
	Owner string
	// RecoveryPoint, on a WON that took the record over (Attempt > 1), is
	// the last checkpoint the previous holder stored: resume after it.
	RecoveryPoint *RecoveryPoint
}

// ExtendResult is the answer to Extend.
type ExtendResult struct {
	Outcome        Outcome
	LeaseExpiresAt time.Time
}

// WaitResult is the answer to Wait: COMPLETED with the record, NOT_FOUND
// when the record is gone (released or expired), or IN_PROGRESS with the
// PENDING record when the timeout ended first.
type WaitResult struct {
	Outcome Outcome
	Record  *Record
}

func durationOf(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func responseOf(r *idempb.Response) *Response {
	if r == nil {
		return nil
	}
	out := &Response{Status: int(r.GetStatus()), Body: r.GetBody()}
	if out.Body == nil {
		out.Body = []byte{}
	}
	for _, h := range r.GetHeaders() {
		out.Headers = append(out.Headers, Header{Name: h.GetName(), Value: h.GetValue()})
	}
	return out
}

func (r Response) proto() *idempb.Response {
	out := &idempb.Response{Status: int32(r.Status), Body: r.Body}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, &idempb.Header{Name: h.Name, Value: h.Value})
	}
	return out
}

func recordOf(r *idempb.Record) *Record {
	if r == nil {
		return nil
	}
	id := r.GetId()
	return &Record{
		ID:             ID{Tenant: id.GetTenant(), Scope: id.GetScope(), Key: id.GetKey()},
		State:          State(r.GetState()),
		Fingerprint:    r.GetFingerprint(),
		Token:          r.GetToken(),
		Attempt:        r.GetAttempt(),
		LeaseExpiresAt: timeOf(r.GetLeaseExpiresAt()),
		CreatedAt:      timeOf(r.GetCreatedAt()),
		ExpiresAt:      timeOf(r.GetExpiresAt()),
		CompletedAt:    timeOf(r.GetCompletedAt()),
		Response:       responseOf(r.GetResponse()),
		RecoveryPoint:  recoveryPointOf(r.GetRecoveryPoint()),
	}
}

func recoveryPointOf(p *idempb.RecoveryPoint) *RecoveryPoint {
	if p == nil {
		return nil
	}
	return &RecoveryPoint{Name: p.GetName(), Data: p.GetData()}
}
