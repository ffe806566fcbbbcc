package idempg

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemnode/idemnode/client"
)

// TxFunc is the side effect: it writes through tx, which Do commits, and
// returns the response every caller of the key gets. It must not commit or
// roll back tx. Return an error marked with client.Permanent to record a
// failure as the key's response (its writes are rolled back); any other
// error rolls back and releases the key, so the next call runs it again.
type TxFunc func(ctx context.Context, tx *sql.Tx) (client.Response, error)

// Runner runs side effects in transactions on db under claims of cl. It is
// safe for concurrent use.
type Runner struct {
	db   *sql.DB
	cl   *client.Client
	opts Options
	t    table
}

// New returns a Runner over db (opened with the pgx stdlib driver, "pgx")
// and cl. The table named by opts must exist (Migrate).
func New(db *sql.DB, cl *client.Client, opts Options) (*Runner, error) {
	if db == nil || cl == nil {
		return nil, errors.New("idempg: New needs a *sql.DB and a *client.Client")
	}
	t, err := newTable(opts)
	if err != nil {
		return nil, err
	}
	return &Runner{db: db, cl: cl, opts: opts, t: t}, nil
}

// Result is what Do produced.
type Result struct {
	// Response is the key's committed response.
	Response client.Response
	// Executed: the function ran in this call and its transaction (or, on
	// a permanent failure, the record of its response) committed.
	Executed bool
	// Replayed: the response was committed by an earlier call, found in
	// idemnode or in the table; the function did not run.
	Replayed bool
}

// outcome is what the transaction step of one Do ended in.
type outcome int

const (
	// failed: nothing was committed; the key is released.
	failed outcome = iota
	// committed: this call's transaction committed the function's writes
	// and the response.
	committed
	// recorded: the function failed permanently; its response was
	// committed alone.
	recorded
	// found: the row was committed earlier; the function did not run.
	found
)

// Do runs fn exactly once for id across every caller that uses this table:
// it claims id with cl.Do, runs fn in a transaction fenced by the key's row
// (see the package documentation), commits, and completes the key with the
// committed response. Callers that find the key completed, in idemnode or in
// the table, get the committed response with Replayed set.
//
// opts go to client.Do (WithLease, WithTTL, WithWait); Do decides what is
// completed itself, so a WithClassifier among them is overridden.
//
// Once this call's transaction committed, Do returns the response with a nil
// error even when completing the key in idemnode failed or was fenced: the
// effect is committed, and the next claim of the key finds the row and
// completes it. An error otherwise means nothing was committed by this call
// (fn's own error, for a transient or permanent failure, is returned as
// client.Do returns it).
func (r *Runner) Do(ctx context.Context, id client.ID, fingerprint []byte, fn TxFunc, opts ...client.Option) (Result, error) {
	if fn == nil {
		return Result{}, errors.New("idempg: Do needs a function")
	}
	var (
		out  outcome
		resp client.Response
	)
	run := func(ctx context.Context) (client.Response, error) {
		var err error
		resp, out, err = r.runTx(ctx, id, fn)
		return resp, err
	}
	// Complete with exactly what is in the row; release otherwise.
	classify := func(client.Response, error) client.Action {
		if out == failed {
			return client.Release
		}
		return client.Complete
	}
	// Full slice expression: never append into the caller's array.
	res, err := r.cl.Do(ctx, id, fingerprint, run, append(opts[:len(opts):len(opts)], client.WithClassifier(classify))...)
	switch {
	case res.Replayed:
		return Result{Response: res.Response, Replayed: true}, err
	case !res.Executed:
		return Result{}, err
	case out == committed:
		return Result{Response: resp, Executed: true}, nil
	case out == found:
		return Result{Response: resp, Replayed: true}, nil
	case out == recorded:
		return Result{Response: resp, Executed: true}, err
	}
	return Result{}, err
}

// runTx is the transaction step of Do, run under the claim.
func (r *Runner) runTx(ctx context.Context, id client.ID, fn TxFunc) (client.Response, outcome, error) {
	token, ok := client.HolderToken(ctx)
	if !ok || token > math.MaxInt64 {
		return client.Response{}, failed, fmt.Errorf("idempg: %s: no usable fencing token (%d)", id, token)
	}
	// The transaction ends with ctx: when client.Do finds the lease lost it
	// cancels ctx, and database/sql rolls the transaction back.
	tx, err := r.db.BeginTx(ctx, r.opts.TxOptions)
	if err != nil {
		return client.Response{}, failed, fmt.Errorf("idempg: %s: begin: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit; nothing to add on failure

	fresh, err := r.fence(ctx, tx, id, token)
	if err != nil {
		return client.Response{}, failed, err
	}
	if !fresh {
		// Committed earlier: read it with a statement of its own, whose
		// snapshot (READ COMMITTED) includes the commit the INSERT waited
		// for. Under REPEATABLE READ the INSERT already failed (serializable
		// below) unless the row is in this snapshot.
		resp, err := r.find(ctx, tx, id)
		return resp, foundOr(err), err
	}

	resp, fnErr := fn(ctx, tx)
	if fnErr != nil {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			fnErr = errors.Join(fnErr, fmt.Errorf("idempg: %s: rollback: %w", id, err))
		}
		if !client.IsPermanent(fnErr) {
			return resp, failed, fnErr
		}
		return r.recordAlone(ctx, id, token, resp, fnErr)
	}
	headers, err := encodeHeaders(resp.Headers)
	if err != nil {
		return resp, failed, fmt.Errorf("idempg: %s: %w", id, err)
	}
	res, err := tx.ExecContext(ctx, r.t.record, id.Tenant, id.Scope, id.Key, int64(token), resp.Status, headers, body(resp.Body))
	if err := one(res, err); err != nil {
		return resp, failed, fmt.Errorf("idempg: %s: record the response: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		// Not committed (or not known to be: the retry's INSERT will wait
		// for this transaction and find its row if it did commit).
		return resp, failed, fmt.Errorf("idempg: %s: commit: %w", id, err)
	}
	return resp, committed, nil
}

// fence inserts the key's row in tx and reports whether it was fresh. A
// serialization failure means a row committed after tx's snapshot (REPEATABLE
// READ or SERIALIZABLE): tx is rolled back and fresh is false.
func (r *Runner) fence(ctx context.Context, tx *sql.Tx, id client.ID, token uint64) (fresh bool, err error) {
	res, err := tx.ExecContext(ctx, r.t.fence, id.Tenant, id.Scope, id.Key, int64(token))
	if isSerialization(err) {
		// The aborted transaction can run nothing more; find reads the row
		// outside it.
		if rbErr := tx.Rollback(); rbErr != nil {
			return false, fmt.Errorf("idempg: %s: fence: %w", id, errors.Join(err, rbErr))
		}
		return false, nil
	}
	n, err := affected(res, err)
	if err != nil {
		return false, fmt.Errorf("idempg: %s: fence: %w", id, err)
	}
	return n == 1, nil
}

// find reads the key's committed response, in tx while tx is live, or in a
// statement of its own after fence rolled tx back.
func (r *Runner) find(ctx context.Context, tx *sql.Tx, id client.ID) (client.Response, error) {
	args := []any{id.Tenant, id.Scope, id.Key}
	row := tx.QueryRowContext(ctx, r.t.find, args...)
	resp, err := scanResponse(row)
	if isSerialization(err) || errors.Is(err, sql.ErrTxDone) {
		resp, err = scanResponse(r.db.QueryRowContext(ctx, r.t.find, args...))
	}
	if err != nil {
		return client.Response{}, fmt.Errorf("idempg: %s: read the committed response: %w", id, err)
	}
	return resp, nil
}

// recordAlone commits a permanent failure's response in a statement of its
// own, after fn's writes were rolled back; a row committed meanwhile by
// another holder wins, and its response is returned instead.
func (r *Runner) recordAlone(ctx context.Context, id client.ID, token uint64, resp client.Response, fnErr error) (client.Response, outcome, error) {
	headers, err := encodeHeaders(resp.Headers)
	if err != nil {
		return resp, failed, errors.Join(fnErr, fmt.Errorf("idempg: %s: %w", id, err))
	}
	n, err := affected(r.db.ExecContext(ctx, r.t.recordAlone, id.Tenant, id.Scope, id.Key, int64(token), resp.Status, headers, body(resp.Body)))
	if err != nil {
		return resp, failed, errors.Join(fnErr, fmt.Errorf("idempg: %s: record the permanent failure: %w", id, err))
	}
	if n == 1 {
		return resp, recorded, fnErr
	}
	theirs, err := scanResponse(r.db.QueryRowContext(ctx, r.t.find, id.Tenant, id.Scope, id.Key))
	if err != nil {
		return resp, failed, errors.Join(fnErr, fmt.Errorf("idempg: %s: read the committed response: %w", id, err))
	}
	return theirs, found, nil
}

func foundOr(err error) outcome {
	if err != nil {
		return failed
	}
	return found
}

func scanResponse(row *sql.Row) (client.Response, error) {
	var (
		token     int64
		status    sql.NullInt32
		headers   []byte
		resp      client.Response
		committed sql.NullTime
	)
	if err := row.Scan(&token, &status, &headers, &resp.Body, &committed); err != nil {
		return client.Response{}, err
	}
	if !status.Valid || !committed.Valid {
		return client.Response{}, fmt.Errorf("row of token %d has no response", token)
	}
	resp.Status = int(status.Int32)
	if err := json.Unmarshal(headers, &resp.Headers); err != nil {
		return client.Response{}, fmt.Errorf("decode the headers of token %d: %w", token, err)
	}
	return resp, nil
}

func encodeHeaders(h []client.Header) ([]byte, error) {
	if h == nil {
		h = []client.Header{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode the response headers: %w", err)
	}
	return b, nil
}

// body keeps an empty body non-NULL, so a NULL in the column means a bug.
func body(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// one checks that a statement changed exactly one row.
func one(res sql.Result, err error) error {
	n, err := affected(res, err)
	if err == nil && n != 1 {
		err = fmt.Errorf("%d rows changed, want 1", n)
	}
	return err
}

// isSerialization reports PostgreSQL's serialization_failure (40001).
func isSerialization(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}
