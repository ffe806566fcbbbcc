package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// problem is an RFC 9457 problem details body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Problem types of the middleware's own answers.
const (
	problemBase        = "https://idemnode.io/problems/"
	ProblemMissingKey  = problemBase + "idempotency-key-missing"
	ProblemInvalidKey  = problemBase + "idempotency-key-invalid"
	ProblemInFlight    = problemBase + "request-in-flight"
	ProblemKeyReused   = problemBase + "idempotency-key-reused"
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
)

// writeProblem answers with a problem body; retryAfter > 0 adds Retry-After
// in whole seconds (at least 1).
func writeProblem(w http.ResponseWriter, status int, typ, title, detail string, retryAfter time.Duration) {
	body, _ := json.Marshal(problem{Type: typ, Title: title, Status: status, Detail: detail})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(max(1, int((retryAfter+time.Second-1)/time.Second))))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
