// Package idemhttp is net/http middleware for the Idempotency-Key header
// (IETF httpapi draft "The Idempotency-Key HTTP Header Field"), backed by
// an idemnode cluster through package client.
//
// A POST or PATCH (configurable) that carries Idempotency-Key runs its
// handler at most once per tenant, scope (method and path) and key; every
// retry is answered with the stored status, headers and body, byte for
// byte, plus "Idempotent-Replayed: true". The answers are:
//
//   - 400 application/problem+json: the key is missing on a route that
//     requires it, malformed (not printable ASCII, a broken sf-string, sent
//     twice) or longer than MaxKeyLength.
//   - 409 with Retry-After: the same request is still running elsewhere and
//     did not finish within Wait. A duplicate that arrives in flight is held
//     by the server and answered the moment the first one finishes.
//   - 422: the key was used before with a different request (another
//     fingerprint).
//   - 503 with Retry-After: the idempotency service cannot be reached; the
//     handler is not run without the guarantee.
//   - The handler's own response otherwise. 2xx and 4xx responses are
//     stored and replayed (a validation error or a declined card is an
//     answer too); 5xx responses and panics release the key, so the retry
//     runs the handler again. Config.Store changes which statuses are stored.
//
// The fingerprint is SHA-256 over the method, the path and the canonical
// body: JSON bodies are parsed and re-serialised with sorted keys, so
// whitespace and key order do not matter; other bodies count byte for
// byte. The tenant comes from Config.Tenant, typically the authenticated
// principal, never from the request body, so one tenant can neither read
// nor block another's keys.
//
// Clients that send no key can, on routes that opt in, get a key derived
// from tenant, method, path and canonical body (DeriveMissingKeys). This is
// weaker than a client-generated key: two deliberate, identical requests
// within the TTL become one (the second is a replay), and a retry whose body
// differs in any byte that survives canonicalisation is a new request. It
// is off by default.
package idemhttp
