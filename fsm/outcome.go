package fsm

// Outcome is the answer of the state machine to one command.
type Outcome uint8

const (
	// OutcomeUnknown is the zero value and never a real answer.
	OutcomeUnknown Outcome = iota
	// OutcomeWon: the claim holds the record; Result.Record carries the token.
	OutcomeWon
	// OutcomeInProgress: another holder's lease is live.
	OutcomeInProgress
	// OutcomeCompleted: the record is completed; Result.Record carries the response.
	OutcomeCompleted
	// OutcomeMismatch: the key is in use by a request with another fingerprint,
	// or a completion with another response. Nothing about the record is revealed.
	OutcomeMismatch
	// OutcomeFenced: the token does not hold the record (the lease was lost).
	OutcomeFenced
	// OutcomeNotFound: no live record under the key.
	OutcomeNotFound
	// OutcomeOK: the command took effect (or had already taken effect).
	OutcomeOK
	// OutcomeQuotaExceeded: the claim or completion would take the tenant
	// past its Quota; nothing was stored. Result.Exceeded says which quota.
	OutcomeQuotaExceeded
	// OutcomeExpired: the key's record is a tombstone. The operation ran,
	// or may have (it expired PENDING), and its response is gone: it must
	// not run again. Result.Record is the tombstone on a claim of the same
	// fingerprint.
	OutcomeExpired
)

var outcomeNames = [...]string{"unknown", "won", "in_progress", "completed", "mismatch", "fenced", "not_found", "ok",
	"quota_exceeded", "expired"}

// String returns the lower-case name used by the CLI and logs.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Result is what applying one command produced.
type Result struct {
	Outcome Outcome
	// Record is the record after the command. It is nil for MISMATCH (which
	// reveals nothing), NOT_FOUND, a release and Expire.
	Record *Record
	// Expired counts the records an Expire command acted on: deleted, or
	// cut down to their tombstone (Tombstoned of them).
	Expired, Tombstoned int
	// Abandoned counts the records an Expire command marked abandoned.
	Abandoned int
	// Exceeded is the quota an OutcomeQuotaExceeded answer hit.
	Exceeded QuotaKind
	// Batch holds one result per command of a Batch, in order.
	Batch []Result
}
