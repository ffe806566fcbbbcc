package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// problem is an RFC 9457 problem details body, with what a client needs
// to decide its next step: what became of the operation the key names,
// and whether sending the request again under a new key is safe.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// OperationState is what became of the operation under the key, where
	// the middleware knows: in_progress, completed, mismatch or expired.
	OperationState string `json:"operation_state,omitempty"`
	// KeyExpiresAt is when the record under the key expires (RFC 3339),
	// where the caller may know it: never for a mismatch, which reveals
	// nothing of the record.
	KeyExpiresAt string `json:"key_expires_at,omitempty"`
	// SafeNewKey says whether this request, sent again under a new key,
	// cannot run the operation a second time: true when it did not run
	// under this key, false when it ran or may have.
	SafeNewKey bool `json:"safe_new_key"`
}

// The operation states a problem names.
const (
	StateInProgress = "in_progress"
	StateCompleted  = "completed"
	StateMismatch   = "mismatch"
	StateExpired    = "expired"
)

// DescribedBy documents the answers: every problem links to it with
// Link rel="describedby", as the Idempotency-Key draft suggests.
const DescribedBy = "https://github.com/idemnode/idemnode/blob/main/docs/PROXY.md#what-callers-get"

// LinkDescribedBy is the Link header value of every problem answer.
const LinkDescribedBy = "<" + DescribedBy + `>; rel="describedby"`

// notRun is the problem of a request that never ran under the key: none
// was sent, the request is refused for what it is (a body too large), or
// the key belongs to another request. A new key is safe.
func notRun(status int, typ, title, detail string) problem {
	return problem{Type: typ, Title: title, Status: status, Detail: detail, SafeNewKey: true}
}

// unknownRun is the problem of a request refused before the record was
// read (no tenant, a limit, the service unreachable): this request may be
// a retry of one that ran, or still runs, under the key, so a new key is
// not safe; the same key is.
func unknownRun(status int, typ, title, detail string) problem {
	return problem{Type: typ, Title: title, Status: status, Detail: detail}
}

// timeString formats t for a problem or a header; zero is "".
func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Problem types of the middleware's own answers.
const (
	problemBase       = "https://idemnode.io/problems/"
	ProblemMissingKey = problemBase + "idempotency-key-missing"
	ProblemInvalidKey = problemBase + "idempotency-key-invalid"
	ProblemInFlight   = problemBase + "request-in-flight"
	ProblemKeyReused  = problemBase + "idempotency-key-reused"
	// ProblemExpired is the 410 answer to a request whose key expired
	// after the operation ran (or may have): its response is gone.
	ProblemExpired     = problemBase + "idempotency-key-expired"
	ProblemUnavailable = problemBase + "idempotency-unavailable"
	ProblemTooLarge    = problemBase + "request-too-large"
	ProblemNoTenant    = problemBase + "tenant-unknown"
	// ProblemRateLimited and ProblemQuotaExceeded are the 429 answers: the
	// tenant is over its claim rate or its quota of stored records.
	ProblemRateLimited   = problemBase + "rate-limited"
	ProblemQuotaExceeded = problemBase + "quota-exceeded"
	// ProblemMisconfigured is the 500 answer when the service refuses the
	// middleware's own credentials.
	ProblemMisconfigured = problemBase + "idempotency-misconfigured"
	// ProblemResponseNotKept is the body of a replay whose original
	// response was too large to store (see Config.MaxStoredBody).
	ProblemResponseNotKept = problemBase + "response-not-kept"
	// ProblemResponseBroken is the 502 (504 on a timeout) answer when the
	// handler's response broke off after it began, before any of it was
	// sent (ResponseBroken).
	ProblemResponseBroken = problemBase + "response-broken"
)

// writeProblem answers with p; retryAfter > 0 adds Retry-After in whole
// seconds (at least 1).
func writeProblem(w http.ResponseWriter, p problem, retryAfter time.Duration) {
	body, _ := json.Marshal(p)
	status := p.Status
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Link", LinkDescribedBy)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(max(1, int((retryAfter+time.Second-1)/time.Second))))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
