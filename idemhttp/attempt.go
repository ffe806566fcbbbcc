package idemhttp

import (
	"net/http"

	"github.com/idemnode/idemnode/client"
)

// attempt is one run of the handler under a key: what it wrote, and what
// Do is to do with the key.
type attempt struct {
	rec *recorder
	// sent is the handler's response (headers only when it streamed).
	sent client.Response
	// release: the key is released whatever the status, so the retry
	// runs the handler again: the response broke before a status that is
	// stored, it is no answer (NotAnAnswer), or the caller left before
	// the handler started.
	release bool
	// panicked is the handler's panic after it wrote a status that is
	// stored, raised again once the key is completed.
	panicked any
}

// keep returns what Do is to store of the handler's response: the
// response, or the not-kept marker when it is too large (it may have
// streamed) or broke off after a status that is stored. Once such a status
// was written, the operation ran, whatever became of its body: the key is
// never released. A response that broke before one releases it.
func (h *handler) keep(id client.ID, a *attempt, broken error) client.Response {
	cfg := &h.m.cfg
	rec := a.rec
	if broken != nil && (rec.status == 0 || !h.route.store(rec.status)) {
		a.release = true
		cfg.Logger.Warn("idemhttp: the response broke off before a status that is stored; the key is released",
			"tenant", id.Tenant, "scope", id.Scope, "key", id.Key, "status", rec.status, "err", broken)
		return client.Response{}
	}
	a.sent = rec.response()
	switch {
	case rec.notAnswer:
		a.release = true
		return a.sent
	case !h.route.store(a.sent.Status):
		return a.sent // classify releases it
	case broken != nil:
		cfg.Logger.Warn("idemhttp: the response broke off after its status; retries are answered that it ran, without it",
			"tenant", id.Tenant, "scope", id.Scope, "key", id.Key, "status", a.sent.Status, "err", broken)
		return brokenKept(a.sent.Status, broken)
	case rec.streamed || !fits(a.sent, cfg.MaxStoredBody):
		cfg.Logger.Warn("idemhttp: response too large to store; retries are answered that it ran, without it",
			"tenant", id.Tenant, "scope", id.Scope, "key", id.Key, "status", a.sent.Status, "bytes", rec.bodyLen)
		return notKept(a.sent, rec.bodyLen, cfg.MaxStoredBody)
	}
	return a.sent
}

// deliver sends the caller what the handler produced, once Do recorded it
// (kept: the key holds the response or its marker).
func deliver(w http.ResponseWriter, a *attempt, kept bool) {
	rec := a.rec
	switch {
	case a.panicked != nil:
		panic(a.panicked)
	case rec.broken != nil && rec.streamed:
		// The caller has the status and part of the body: all that is
		// left is to cut the connection, as ReverseProxy does, so that
		// it never takes the part for the whole.
		panic(http.ErrAbortHandler)
	case rec.broken != nil:
		writeProblem(w, brokenProblem(rec.status, rec.broken, kept), 0)
	case rec.streamed:
		// Sent as it was written.
	case a.sent.Status == 0:
		// The caller left before the handler started: nothing ran.
	default:
		writeResponse(w, a.sent)
	}
}
