// Package idempg runs a side effect's PostgreSQL transaction under an
// idemnode claim, so that the effect is committed exactly once per key: for
// each key at most one transaction that ran the function commits, and every
// caller gets the response that transaction committed.
//
// # Why a claim alone is not enough
//
// idemnode grants one holder of a key at a time and (*client.Client).Do
// cancels the function when the lease is lost. A holder that pauses past its
// lease (a GC pause, a frozen VM, a partition) can still reach its COMMIT
// after another holder took the key over: the lease is a promise about time,
// and a paused process cannot keep it. Martin Kleppmann's fencing argument
// applies: the resource that holds the effect must refuse the stale write
// itself. Here that resource is the user's own database.
//
// # The design
//
// Each key has a row in a table of the package's own (Migrate creates it;
// MigrationSQL returns the SQL), keyed (tenant, scope, key). The tenant is
// id.Tenant, or Options.Tenant when id.Tenant is empty (as it is for
// clients of a server with authentication, which takes the tenant from the
// credentials the database cannot see); Do refuses a call with neither, so
// two tenants never share a row. Runner.Do:
//
//  1. claims the key with client.Do (which extends the lease while the
//     function runs and cancels it with client.ErrFenced when the lease is
//     lost; a key already completed in idemnode is replayed from there);
//  2. BEGINs a transaction and, as its first statement, inserts the key's
//     row with the claim's fencing token and the request's fingerprint:
//     INSERT ... ON CONFLICT DO NOTHING;
//  3. when a row was already there it was committed by an earlier holder
//     (rows are only ever visible committed): the function does not run, the
//     transaction is rolled back, and the key is completed in idemnode with
//     the response read from the row. A holder that died between its COMMIT
//     and its Complete is covered by exactly this. A row committed with
//     another fingerprint is client.ErrMismatch and the key is released,
//     also when idemnode no longer has the key's record;
//  4. otherwise runs the function in the transaction, checks its response
//     against what idemnode's Complete accepts (refusing it before COMMIT),
//     UPDATEs the row with it, COMMITs, and completes the key with it.
//
// On a fresh key that is two statements inside the caller's transaction (the
// INSERT and the UPDATE) and no transaction of its own.
//
// # Why at most one transaction that ran the function commits
//
// The fence is the row's primary key, enforced by PostgreSQL. Every
// transaction that runs the function first inserts the key's row and keeps it
// (it commits together with the function's writes, or both roll back). Two
// transactions cannot both commit an inserted row with the same key: the
// second INSERT blocks on the first's uncommitted row until that transaction
// ends, then either finds the row committed (step 3: it does not run the
// function) or, if the first rolled back, inserts the row itself. So the
// function's writes are committed at most once per key, whatever the leases
// say, and whichever holder reached the row first:
//
//   - A stale holder frozen before its INSERT, whose key another holder
//     took over and committed, is refused by the database when it resumes:
//     its INSERT finds the committed row, and it returns that row's
//     response instead of running the function.
//   - A stale holder frozen after its INSERT holds the row lock: the new
//     holder's INSERT waits for it. If the stale holder resumes and commits
//     first (its commit is the one), the new holder finds its row and
//     replays it. If the stale transaction ends without committing (its
//     session is terminated, its process dies, its context is cancelled
//     when the lease is found lost), the new holder runs the function.
//     Either way one transaction commits. Set
//     idle_in_transaction_session_timeout on the connections Runner uses,
//     below the lease and above the longest gap between two statements of
//     the function (a call to another system between statements counts),
//     and PostgreSQL itself terminates a frozen holder's idle transaction,
//     so the new holder waits for the database's timeout rather than for
//     the frozen process to wake. A timeout shorter than such a gap ends a
//     healthy holder's transaction: nothing commits, the key is released,
//     and the call returns an error (safe, but it never succeeds).
//
// The row also records the fencing token of the claim that committed it, for
// audit. Token order plays no part in the decision: the first commit of the
// row is final, and a later claim cannot take it back.
//
// # Why every caller gets the committed response
//
// idemnode is completed only with a response that is in the row: the one this
// call committed, or the one it found there. A permanent failure
// (client.Permanent) rolls the function's writes back and records its
// response in the row in a single autocommitted INSERT before completing
// the key, so a stale holder resuming later finds that response rather than
// running the function; when that INSERT fails, nothing is recorded and the
// error Do returns is not permanent. A transient failure rolls back and
// releases the key: nothing was committed, and the next call runs the
// function.
//
// A COMMIT that returns an error (the connection lost, ctx cancelled) may
// have committed. Do then runs the fence INSERT again in a transaction of
// its own on another connection: it waits for the old transaction's row
// lock, so it answers after that transaction ended. The row with this
// call's token means committed (Do completes the key and returns the
// response); a fresh insert, rolled back at once, means not committed (an
// error, the key released); no answer (an error, or none in 30 s) is
// ErrCommitUnknown, the key released, and the next call's fence finds out.
//
// # Isolation
//
// READ COMMITTED, PostgreSQL's default, is what the steps above assume: after
// an INSERT that waited for a concurrent transaction, the next statement sees
// what that transaction committed. Under REPEATABLE READ and SERIALIZABLE
// (Options.TxOptions) an INSERT that meets a row committed after the
// transaction's snapshot fails with a serialization error; Do then reads the
// row outside the transaction and replays it; when there is no such row the
// 40001 was about something else, and Do returns "serialization failure,
// retry the call". A serialization failure of the function's own
// statements or of the COMMIT is returned as an error and the key is
// released: retry the call.
//
// # Limits
//
// Only writes made through the transaction are exactly once. A call the
// function makes to another system (a card network, an email provider) can
// run again when a transaction that made it does not commit: pass that
// system the key or the claim's token (client.HolderToken) as its own
// idempotency key. Every writer of a key must go through Runner.Do with the
// same table: the guarantee is between them. Rows must be kept at least as
// long as the keys' records in idemnode (their TTL, plus tombstones): a key
// whose row was purged but whose record lives on is answered from idemnode,
// but a key whose record is gone and whose row is purged runs again.
package idempg
