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
func missingHeader(header string) problem {
	return notRun(http.StatusBadRequest, ProblemMissingKey, header+" header is missing",
		fmt.Sprintf("This operation requires an %s header; send a new unique key (a UUID) per operation and the same key on every retry of it.", header))
}

// malformedHeader is the 400 answer to a key header parseKey refused.
func malformedHeader(header string, err error, maxLen int) problem {
	return notRun(http.StatusBadRequest, ProblemInvalidKey, header+" header is malformed",
		fmt.Sprintf("%s: %v; a key is 1-%d bytes of printable ASCII.", header, err, maxLen))
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
