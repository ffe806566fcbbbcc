// Package proxy is `idemnode proxy`: a reverse proxy that puts the
// Idempotency-Key semantics of package idemhttp in front of any upstream
// HTTP service, whatever its language. A guarded request's key is claimed
// on the idemnode cluster before the upstream sees it; the upstream's
// response is stored and every retry is answered from the record, byte for
// byte. The upstream runs again for a key only after the key was released
// (an answer the route does not store, an upstream that failed before it
// sent a status, an answer that could not be recorded): docs/PROXY.md
// lists the cases.
//
// Which requests are guarded, and how, comes from a routes file (routes.go,
// docs/PROXY.md): method and path pattern, whether the key is required,
// lease and TTL, which upstream statuses are stored (the rest release the
// key, so the retry runs again), request and response size limits, what
// goes into the fingerprint, and where the tenant comes from. Without one,
// every POST and PATCH is guarded and must carry a key.
//
// The upstream sees the request as the client sent it, plus
// Idempotency-Token: the fencing token of the claim it runs under, which
// grows with every later claim of the key, so a downstream system can
// refuse a stale holder.
//
// New returns the handler alone; Start runs it as `idemnode proxy` does,
// with its listeners' connection caps and the operator endpoints
// (serve.go).
package proxy
