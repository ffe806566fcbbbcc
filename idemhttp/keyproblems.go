package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
)

// refuse answers a request refused before anything was claimed.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, p problem) {
	h.observe(r, OutcomeRefused)
	writeProblem(w, p, 0)
}

// missingHeader is the 400 answer to a request without the key's header.
// A sender's event id is the sender's to send, not the caller's to make up.
func missingHeader(header string, sender bool) problem {
	detail := fmt.Sprintf("This operation requires an %s header; send a new unique key (a UUID) per operation and the same key on every retry of it.", header)
	if sender {
		detail = fmt.Sprintf("This endpoint takes its idempotency key from the sender's event id in the %s header, and the request has none.", header)
	}
	return notRun(http.StatusBadRequest, ProblemMissingKey, header+" header is missing", detail)
}

// malformedHeader is the 400 answer to a key header parseKey or senderKey
// refused.
func malformedHeader(header string, sender bool, err error, maxLen int) problem {
	what := "a key"
	if sender {
		what = "an event id used as the key"
	}
	return notRun(http.StatusBadRequest, ProblemInvalidKey, header+" header is malformed",
		fmt.Sprintf("%s: %v; %s is 1-%d bytes of printable ASCII.", header, err, what, maxLen))
}

// keySource names where a route's key comes from, for the problems that
// speak of it: the Idempotency-Key header, a sender's header or a field.
func (rt *route) keySource() string {
	if !rt.field.IsZero() {
		return "the event id in the body's field " + rt.field.String()
	}
	if rt.sender {
		return "the event id in the " + rt.header + " header"
	}
	return "the " + rt.header + " header's key"
}

// badKeyField is the 400 answer to a body fieldKey found no key in; each
// names the field, so the sender's payload can be fixed.
func badKeyField(field Pointer, err error, maxLen int) problem {
	switch {
	case errors.Is(err, errMissingKey):
		return notRun(http.StatusBadRequest, ProblemMissingKey, "Key field "+field.String()+" is missing",
			fmt.Sprintf("This operation takes its idempotency key from the JSON body's field %s (a JSON Pointer, RFC 6901); the body has no such field, or it is null or empty.", field))
	case errors.Is(err, errBodyNotJSON):
		return notRun(http.StatusBadRequest, ProblemInvalidKey, "Request body is not JSON",
			fmt.Sprintf("This operation takes its idempotency key from the JSON body's field %s, and the body is not one JSON value.", field))
	default:
		return notRun(http.StatusBadRequest, ProblemInvalidKey, "Key field "+field.String()+" is malformed",
			fmt.Sprintf("%v; a key is a string or a number of 1-%d bytes of printable ASCII.", err, maxLen))
	}
}
