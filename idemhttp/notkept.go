package idemhttp

import (
	"encoding/json"
	"fmt"

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

// notKept is what is stored in place of a response too large to store:
// its status, so a retry learns that the operation ran and how it ended,
// and a problem body saying why the rest is missing. Releasing the key
// instead would run the operation again on the retry.
func notKept(resp client.Response, maxBody int) client.Response {
	marker := client.Response{Status: resp.Status, Headers: []client.Header{{Name: HeaderNotKept, Value: "true"}}}
	if !bodyAllowed(resp.Status) {
		return marker
	}
	body, _ := json.Marshal(problem{Type: ProblemResponseNotKept, Title: "Response not kept", Status: resp.Status,
		OperationState: StateCompleted,
		Detail: fmt.Sprintf("The operation ran and answered %d, but its response (%d body bytes, %d headers) was larger than "+
			"this service stores (%d body bytes, %d headers of %d bytes), so it was not kept. Do not send the operation "+
			"again with a new key: look its result up instead.",
			resp.Status, len(resp.Body), len(resp.Headers), maxBody, maxStoredHeaders, maxStoredHeaderBytes)})
	marker.Headers = append([]client.Header{{Name: "Content-Type", Value: "application/problem+json"},
		{Name: "Link", Value: LinkDescribedBy}}, marker.Headers...)
	marker.Body = body
	return marker
}
