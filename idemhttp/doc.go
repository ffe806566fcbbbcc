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
//   - 410 (ProblemExpired): the key's TTL ended after the operation ran
//     (or while it was still in progress), and the service keeps a
//     tombstone (serve --tombstone-ttl): the response is gone, the handler
//     does not run again, and the body says when it ran and expired.
//   - 429 with Retry-After: the service refused the claim because the
//     tenant is over its claim rate (problem type ProblemRateLimited) or its
//     quota of stored keys or bytes (ProblemQuotaExceeded). The handler did
//     not run and nothing was stored, so retrying with the same key is safe;
//     Retry-After is the server's hint in whole seconds, rounded up.
//   - 500 (ProblemMisconfigured): the service refused the middleware's own
//     credentials (Unauthenticated: a missing, unknown or revoked token or
//     certificate) or the tenant it asked for (PermissionDenied: with
//     authentication on, the credentials decide the tenant, and
//     Config.Tenant returned another). This is the server's fault, not the
//     caller's, so it is not a 4xx, and no Retry-After: retrying does not
//     help until the configuration is fixed. The handler does not run, and
//     an error is logged naming the gRPC code.
//   - 503 with Retry-After: the idempotency service cannot be reached; the
//     handler is not run without the guarantee.
//   - The handler's own response otherwise. 2xx and 4xx responses are
//     stored and replayed (a validation error or a declined card is an
//     answer too); 5xx responses, and panics before a status, release the
//     key, so the retry runs the handler again. Config.Store changes which
//     statuses are stored.
//   - A response too large to store (a body over Config.MaxStoredBody, more
//     than 64 headers or 16 KiB of them) is sent whole, and a marker is
//     stored in its place: every retry gets the same status with
//     "Idempotent-Response-Not-Kept: true" and a problem body
//     (ProblemResponseNotKept) saying the operation ran. Releasing the key
//     instead would run the handler again on the retry. The middleware
//     holds a response up to Config.MaxStoredBody until the handler
//     returns; past that size it streams the rest to the caller, so a
//     request costs at most that much memory plus a constant.
//   - Once the handler wrote a status that is stored, the operation ran:
//     if its response then breaks (the handler panics, or reports a body
//     it relays broken off or timed out with ResponseBroken), the key keeps
//     the not-kept marker and is never released. A caller that got nothing
//     of the response yet gets a 502 problem (504 for a timeout) of type
//     ProblemResponseBroken, or the aborted connection of the panic; one
//     that got a streamed part has its connection cut.
//
// A completion can be refused too, after the handler ran: a response that
// would take the tenant past its byte quota is not stored. The side effect
// has happened, so the caller gets the handler's response (a 429 would
// invite a retry that runs it again); the refusal is logged, and the key
// stays claimed until its lease ends, so a retry within the lease is
// answered 409 and one after it runs the handler again.
//
// A caller that leaves while the handler runs cancels the handler's
// context, as net/http does, but not the claim: its lease is extended
// until the handler returns, and what it answers is stored, so a retry
// meanwhile is held or answered 409, never run a second time. A caller
// that leaves before the handler starts releases the key; nothing ran.
//
// The handler runs with Do's context: client.RunFrom(r.Context()) is the
// claim it runs under, so a multi-step handler records each step it
// finishes (Run.Checkpoint) and, when a retry takes the key over after a
// crash or a 5xx between steps, resumes after the last one (Run.Resume)
// instead of running the first steps again.
//
// The fingerprint is SHA-256 over the method, the path and the canonical
// body: JSON bodies are parsed and re-serialised with sorted keys, so
// whitespace and key order do not matter; other bodies count byte for
// byte. The tenant comes from Config.Tenant, typically the authenticated
// principal, never from the request body, so one tenant can neither read
// nor block another's keys.
//
// # How long a request waits without quorum
//
// While the cluster has no leader (a majority of nodes down or cut off),
// the claim is retried until the SDK gives up, then answered 503: by
// default after about 35 s, client.Config.Timeout (30 s) plus the wait for
// a duplicate in flight (Config.Wait, 5 s). To answer sooner, set a lower
// client.Config.Timeout on the client.Client given as Config.Client (with
// Timeout 2s and Config.Wait 1s the 503 comes within about 3 s), or give
// the request's context a deadline before the middleware (an
// http.Server's handler timeout, a context.WithTimeout middleware): a call
// whose context has a deadline is bounded by that deadline instead, the
// wait included, and answers before it. The handler never runs without
// the guarantee.
//
// Clients that send no key can, on routes that opt in, get a key derived
// from tenant, method, path and canonical body (DeriveMissingKeys). This is
// weaker than a client-generated key: two deliberate, identical requests
// within the TTL become one (the second is a replay), and a retry whose body
// differs in any byte that survives canonicalisation is a new request. It
// is off by default.
//
// Webhook receivers take the key from the sender's event id instead: a
// named header (KeyFromHeader: X-GitHub-Delivery, Standard Webhooks'
// webhook-id), read as sent, or a field of the JSON body (Config.KeyJSON,
// KeyFromJSON: a JSON Pointer such as /id, Stripe's event id). Each
// attempt's signature and timestamp headers stay out of the fingerprint,
// so a retry is a replay however it is signed. Such routes change three
// defaults: a delivery without the id is answered 400 naming the header
// or field (KeyOptional and DeriveMissingKeys do not apply); only 2xx
// answers are stored, so a 4xx (an order not known yet, a forged delivery
// refused) leaves the sender's retry free to run again; and the default
// fingerprint is FingerprintWithoutBody, since attempts of one event may
// differ in the body. An explicit Config.Store or Config.Fingerprint
// still wins. docs/WEBHOOKS.md says which TTL the senders' retries need.
package idemhttp
