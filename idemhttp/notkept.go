package idemhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/idemnode/idemnode/client"
)

// The server's limits on a stored response's headers (docs/API.md): a
// response past them cannot be stored either.
const (
	maxServiceBody       = 1 << 20
	maxStoredHeaders     = 64
	maxStoredHeaderBytes = 16 << 10
)

// HeaderNotKept marks a replay whose original response was too large to
// store: the operation ran, with the replay's status.
const HeaderNotKept = "Idempotent-Response-Not-Kept"

// HeaderCompletedAt, beside Idempotent-Replayed: true, is when the replayed
// response was stored (RFC 3339): a client that retries a day later learns
// that the operation ran then, not now.
const HeaderCompletedAt = "Idempotent-Completed-At"

// fits reports whether the service can store resp.
func fits(resp client.Response, maxBody int) bool {
	if len(resp.Body) > maxBody || len(resp.Headers) > maxStoredHeaders {
		return false
	}
	n := 0
	for _, h := range resp.Headers {
		n += len(h.Name) + len(h.Value)
	}
	return n <= maxStoredHeaderBytes
}

// notKept is what is stored in place of a response too large to store
// (bodyLen body bytes, which may have streamed): its status, so a retry
// learns that the operation ran and how it ended, and a problem body
// saying why the rest is missing. Releasing the key instead would run the
// operation again on the retry.
func notKept(resp client.Response, bodyLen int64, maxBody int) client.Response {
	return marker(resp.Status, fmt.Sprintf("The operation ran and answered %d, but its response (%d body bytes, %d headers) was larger than "+
		"this service stores (%d body bytes, %d headers of %d bytes), so it was not kept. Do not send the operation "+
		"again with a new key: look its result up instead.",
		resp.Status, bodyLen, len(resp.Headers), maxBody, maxStoredHeaders, maxStoredHeaderBytes))
}

// brokenKept is what is stored when the response broke off after its
// status (ResponseBroken, or a panic): the operation ran, and what came of
// its body is no answer to replay.
func brokenKept(status int, cause error) client.Response {
	return marker(status, fmt.Sprintf("The operation ran and answered %d, but its response %s, so it was not kept. "+
		"Do not send the operation again with a new key: look its result up instead.", status, brokenHow(cause)))
}

// marker is the not-kept marker of a response with status.
func marker(status int, detail string) client.Response {
	m := client.Response{Status: status, Headers: []client.Header{{Name: HeaderNotKept, Value: "true"}}}
	if !bodyAllowed(status) {
		return m
	}
	body, _ := json.Marshal(problem{Type: ProblemResponseNotKept, Title: "Response not kept", Status: status,
		OperationState: StateCompleted, Detail: detail})
	m.Headers = append([]client.Header{{Name: "Content-Type", Value: "application/problem+json"},
		{Name: "Link", Value: LinkDescribedBy}}, m.Headers...)
	m.Body = body
	return m
}

// brokenHow says what became of a response that broke: it timed out or
// broke off. The cause itself (addresses, a dependency's words) is logged,
// never sent.
func brokenHow(cause error) string {
	if isTimeout(cause) {
		return "did not arrive in time"
	}
	return "broke off before it was complete"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// brokenProblem is the answer to a caller whose response broke before any
// of it was sent: 504 when it timed out, else 502. kept says whether the
// key holds the not-kept marker (the operation ran, with status) or was
// released (a status that is not stored, or none: a retry runs it again).
func brokenProblem(status int, cause error, kept bool) problem {
	code := http.StatusBadGateway
	if isTimeout(cause) {
		code = http.StatusGatewayTimeout
	}
	p := problem{Type: ProblemResponseBroken, Title: "Response broken", Status: code}
	if kept {
		p.OperationState = StateCompleted
		p.Detail = fmt.Sprintf("The operation ran and answered %d, but its response %s. A retry with this key is answered "+
			"that it ran, without its response; do not send it again with a new key: look its result up instead.", status, brokenHow(cause))
		return p
	}
	p.Detail = fmt.Sprintf("The response %s and was not stored; retry with the same key, which runs the operation again.", brokenHow(cause))
	return p
}
