// Package client is the Go SDK of idemnode, the highly available
// idempotency-key service.
//
// A Client talks to a cluster given a few node addresses. It finds the
// leader (Admin.Status on any node) and sends writes and linearizable reads
// there directly; when no leader is known, or its address cannot be
// reached from here, it sends them to any node, which forwards them. Calls that fail with Unavailable (no leader yet, leadership
// changed, a node unreachable) are retried with exponential backoff and full
// jitter until the caller's context ends. Every idemnode operation is safe
// to send twice, and a Claim reuses the same owner nonce on every retry, so
// a claim whose answer was lost on the wire is answered WON with the same
// token again: a retry never produces a second winner.
//
// # The high-level call
//
// Do runs a side effect at most once per key and TTL: it claims the key,
// runs the function while extending the lease in the background, and
// completes the key with the function's Response (replayed to every later
// caller) or releases it after a transient failure so that a retry runs
// the function again. A duplicate that arrives while the function runs is
// held by the server and answered when the holder finishes. A Classifier
// decides what is stored: by default a nil error or one marked with
// Permanent completes, any other error releases.
//
// # Choosing a key
//
// The key names one logical operation, and every retry of that operation
// must send the same key:
//
//   - NewKey returns a random UUID (version 4). Generate it once, when the
//     operation is created (the user pressed "Pay", a job was enqueued), keep
//     it with the operation, and send it on every retry. Never generate a new
//     key in a retry loop: that makes every attempt a new operation.
//   - DeriveKey returns a name-based UUID (version 5) computed from stable
//     business identifiers, such as tenant, order id and intent version.
//     Use it when the caller cannot keep state between attempts, for example
//     a consumer of redelivered messages: every redelivery derives the same
//     key. Include a version or attempt number that changes when the user
//     really means to do it again (a second, deliberate payment).
//
// # Credentials
//
// A server started with --auth takes the tenant from the caller's
// credentials: a client certificate (Config.TransportCredentials with
// mutual TLS) or a bearer token (WithToken in Config.DialOptions).
//
// The low-level calls (Claim, Complete, Release, Extend, Get, Wait) map one
// to one onto the idem.v1 API; refusals such as MISMATCH and FENCED are
// outcomes in their results, not errors.
//
// # Transport security
//
// A cluster serves TLS (docs/SECURITY.md); give the client the CA that
// signed the servers' certificates, and a client certificate when the
// servers require one:
//
//	cfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
//	c, err := client.New(client.Config{Addrs: addrs, TransportCredentials: credentials.NewTLS(cfg)})
//
// Leave ServerName empty: each node is dialled by the address it is listed
// under in Config.Addrs or, for the leader, the address it advertises
// (--grpc-advertise), with that host as the expected name, so every server's
// certificate must name both. Without credentials the client speaks
// plaintext, for a node started with --dev or --insecure.
//
// # Command-line tools
//
// A tool that makes one call and must say within its timeout what
// happened (the idemnode CLI) sets Config.OneShot: every call then goes to
// the listed nodes in order, each at most once (Endpoints), and a failure
// is a *Failure, which says it for a person and a script (Describe). The
// admin calls the SDK has no method for run over Endpoints directly, with
// Backup and AwaitNewLeader; Endpoints.Once sends a call that is not
// idempotent to one node only. The Reason constants are the ErrorInfo
// reasons of every idemnode error, the servers' and Describe's own.
//
// # Advertised addresses the client cannot reach
//
// The leader's advertised address may not resolve or answer where the
// client runs: a compose cluster advertises container names, which only
// its own network resolves. The client then sends the leader's calls to
// the listed address at which the leader answered, or, when the leader is
// not listed, to the listed nodes in turn, which forward them; it tries the
// advertised address again a minute later.
package client
