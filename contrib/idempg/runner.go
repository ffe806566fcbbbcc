package idempg

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

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
// the table, get the committed response with Replayed set. A row committed
// for the key with another fingerprint is client.ErrMismatch, as idemnode
// answers, even when idemnode no longer has the key's record.
//
// id.Tenant may be empty only when Options.Tenant names the tenant; see
// Options.Tenant.
//
// opts go to client.Do (WithLease, WithTTL, WithWait); Do decides what is
// completed itself, so a WithClassifier among them is overridden.
//
// Once this call's transaction committed, Do returns the response with a nil
// error even when completing the key in idemnode failed or was fenced: the
// effect is committed, and the next claim of the key finds the row and
// completes it. When COMMIT itself fails (a lost connection, a cancelled
// ctx), Do finds out whether it committed by running the fence again on
// another connection, which waits for the old transaction to end: committed,
// Do returns the response with a nil error; not committed, the error; and
// when it cannot tell, an error wrapping ErrCommitUnknown. Any other error
// means nothing was committed by this call. fn's own error, for a transient
// or a permanent failure, is returned as client.Do returns it; a permanent
// failure that could not be recorded is returned as an error that is not
// permanent (client.IsPermanent is false), with fn's error in its text.
func (r *Runner) Do(ctx context.Context, id client.ID, fingerprint []byte, fn TxFunc, opts ...client.Option) (Result, error) {
	if fn == nil {
		return Result{}, errors.New("idempg: Do needs a function")
	}
	row, err := r.rowID(id)
	if err != nil {
		return Result{}, err
	}
	var (
		out  outcome
		resp client.Response
	)
	run := func(ctx context.Context) (client.Response, error) {
		token, ok := client.HolderToken(ctx)
		if !ok || token > math.MaxInt64 {
			return client.Response{}, fmt.Errorf("idempg: %s: no usable fencing token (%d)", id, token)
		}
		c := call{id: row, token: int64(token), fingerprint: bytesOrEmpty(fingerprint)}
		var err error
		resp, out, err = r.runTx(ctx, c, fn)
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

// rowID is id with the tenant its row is keyed on.
func (r *Runner) rowID(id client.ID) (client.ID, error) {
	switch {
	case id.Tenant == "" && r.opts.Tenant == "":
		return client.ID{}, fmt.Errorf("idempg: %s: empty id.Tenant and no Options.Tenant: rows are keyed by tenant, so two tenants' keys would share rows; set Options.Tenant to the tenant of the client's credentials", id)
	case id.Tenant == "":
		id.Tenant = r.opts.Tenant
	case r.opts.Tenant != "" && id.Tenant != r.opts.Tenant:
		return client.ID{}, fmt.Errorf("idempg: %s: id.Tenant %q is not this Runner's Options.Tenant %q", id, id.Tenant, r.opts.Tenant)
	}
	return id, nil
}

// call is one claim's part of a Do: the row's key, the claim's fencing
// token and the request's fingerprint.
type call struct {
	id          client.ID
	token       int64
	fingerprint []byte
}

func (c call) key() []any { return []any{c.id.Tenant, c.id.Scope, c.id.Key} }

// row is a committed row of the table.
type row struct {
	token       int64
	fingerprint []byte
	resp        client.Response
}

// runTx is the transaction step of Do, run under the claim.
func (r *Runner) runTx(ctx context.Context, c call, fn TxFunc) (client.Response, outcome, error) {
	// The transaction ends with ctx: when client.Do finds the lease lost it
	// cancels ctx, and database/sql rolls the transaction back.
	tx, err := r.db.BeginTx(ctx, r.opts.TxOptions)
	if err != nil {
		return client.Response{}, failed, fmt.Errorf("idempg: %s: begin: %w", c.id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit; nothing to add on failure

	fresh, err := r.fence(ctx, tx, c)
	if err != nil {
		return client.Response{}, failed, err
	}
	if !fresh {
		// Committed earlier: read it with a statement of its own, whose
		// snapshot (READ COMMITTED) includes the commit the INSERT waited
		// for. Under REPEATABLE READ the INSERT already failed (serializable
		// below) unless the row is in this snapshot.
		return r.found(ctx, tx, c)
	}

	resp, fnErr := fn(ctx, tx)
	if fnErr != nil {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			fnErr = errors.Join(fnErr, fmt.Errorf("idempg: %s: rollback: %w", c.id, err))
		}
		if !client.IsPermanent(fnErr) {
			return resp, failed, fnErr
		}
		return r.recordAlone(ctx, c, resp, fnErr)
	}
	// idemnode must accept what is committed: a response it refused
	// would leave the key released with its effect committed.
	headers, err := r.encode(resp)
	if err != nil {
		return resp, failed, fmt.Errorf("idempg: %s: nothing committed: %w", c.id, err)
	}
	res, err := tx.ExecContext(ctx, r.t.record, c.id.Tenant, c.id.Scope, c.id.Key, c.token, resp.Status, headers, bytesOrEmpty(resp.Body))
	if err := one(res, err); err != nil {
		return resp, failed, fmt.Errorf("idempg: %s: record the response: %w", c.id, err)
	}
	if err := tx.Commit(); err != nil {
		return r.settle(ctx, c, resp, err)
	}
	return resp, committed, nil
}

// settleTimeout bounds settle's wait for the old transaction to end.
const settleTimeout = 30 * time.Second

// settle finds out whether a transaction whose COMMIT returned commitErr
// committed: the connection may have been lost after the server committed.
// It runs the fence again in a transaction of its own on another
// connection; the INSERT waits for the old transaction's row lock, so its
// answer comes after that transaction ended. A row with this call's token
// is this call's commit; a fresh insert (rolled back here) means nothing
// was committed; another claim's row means that one committed instead.
func (r *Runner) settle(ctx context.Context, c call, resp client.Response, commitErr error) (client.Response, outcome, error) {
	unknown := func(err error) (client.Response, outcome, error) {
		return resp, failed, fmt.Errorf("idempg: %s: commit: %w: %w (finding out: %w)", c.id, ErrCommitUnknown, commitErr, err)
	}
	// ctx may be what cancelled the COMMIT.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return unknown(err)
	}
	defer tx.Rollback() //nolint:errcheck // the probe's insert is never kept
	n, err := affected(tx.ExecContext(ctx, r.t.fence, append(c.key(), c.token, c.fingerprint)...))
	if err != nil {
		return unknown(err)
	}
	if n == 1 {
		return resp, failed, fmt.Errorf("idempg: %s: commit: %w (not committed: the key's row is absent)", c.id, commitErr)
	}
	got, err := r.read(ctx, r.db, c)
	if err != nil {
		return unknown(err)
	}
	if got.token == c.token {
		return got.resp, committed, nil
	}
	return r.check(c, got)
}

// fence inserts the key's row in tx and reports whether it was fresh. A
// serialization failure means a row committed after tx's snapshot (REPEATABLE
// READ or SERIALIZABLE): tx is rolled back and fresh is false.
func (r *Runner) fence(ctx context.Context, tx *sql.Tx, c call) (fresh bool, err error) {
	res, err := tx.ExecContext(ctx, r.t.fence, append(c.key(), c.token, c.fingerprint)...)
	if isSerialization(err) {
		// The aborted transaction can run nothing more; found reads the
		// row outside it.
		if rbErr := tx.Rollback(); rbErr != nil {
			return false, fmt.Errorf("idempg: %s: fence: %w", c.id, errors.Join(err, rbErr))
		}
		return false, nil
	}
	n, err := affected(res, err)
	if err != nil {
		return false, fmt.Errorf("idempg: %s: fence: %w", c.id, err)
	}
	return n == 1, nil
}

// found reads the key's committed row, in tx while tx is live, or in a
// statement of its own after fence rolled tx back, and returns its response
// when the fingerprints agree.
func (r *Runner) found(ctx context.Context, tx *sql.Tx, c call) (client.Response, outcome, error) {
	got, err := r.read(ctx, tx, c)
	if isSerialization(err) || errors.Is(err, sql.ErrTxDone) {
		got, err = r.read(ctx, r.db, c)
		if errors.Is(err, sql.ErrNoRows) {
			// The fence's 40001 was not about this key's row.
			return client.Response{}, failed, fmt.Errorf("idempg: %s: fence: serialization failure (40001) and no committed row for the key: retry the call", c.id)
		}
	}
	if err != nil {
		return client.Response{}, failed, err
	}
	return r.check(c, got)
}

// check returns a committed row's response as found, or client.ErrMismatch
// when it was committed for another request.
func (r *Runner) check(c call, got row) (client.Response, outcome, error) {
	if !bytes.Equal(got.fingerprint, c.fingerprint) {
		return client.Response{}, failed, fmt.Errorf("idempg: %s: the key's row was committed with another fingerprint: %w", c.id, client.ErrMismatch)
	}
	return got.resp, found, nil
}

// querier is a *sql.Tx or a *sql.DB.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// read reads the key's committed row through q.
func (r *Runner) read(ctx context.Context, q querier, c call) (row, error) {
	got, err := scanRow(q.QueryRowContext(ctx, r.t.find, c.key()...))
	if err != nil {
		return row{}, fmt.Errorf("idempg: %s: read the committed response: %w", c.id, err)
	}
	return got, nil
}

// recordAlone commits a permanent failure's response in a statement of its
// own, after fn's writes were rolled back; a row committed meanwhile by
// another holder wins, and its response is returned instead. When the
// response cannot be recorded, fn's error is returned as a transient one:
// nothing was recorded, so the key is released and must not look answered.
func (r *Runner) recordAlone(ctx context.Context, c call, resp client.Response, fnErr error) (client.Response, outcome, error) {
	notRecorded := func(err error) (client.Response, outcome, error) {
		return resp, failed, fmt.Errorf("idempg: %s: the permanent failure %q was not recorded, the key is released: %w", c.id, fnErr.Error(), err)
	}
	headers, err := r.encode(resp)
	if err != nil {
		return notRecorded(err)
	}
	n, err := affected(r.db.ExecContext(ctx, r.t.recordAlone, c.id.Tenant, c.id.Scope, c.id.Key, c.token, c.fingerprint,
		resp.Status, headers, bytesOrEmpty(resp.Body)))
	if err != nil {
		return notRecorded(err)
	}
	if n == 1 {
		return resp, recorded, fnErr
	}
	got, err := r.read(ctx, r.db, c)
	if err != nil {
		return notRecorded(err)
	}
	return r.check(c, got)
}

func scanRow(sr *sql.Row) (row, error) {
	var (
		got       row
		status    sql.NullInt32
		headers   []byte
		committed sql.NullTime
	)
	if err := sr.Scan(&got.token, &got.fingerprint, &status, &headers, &got.resp.Body, &committed); err != nil {
		return row{}, err
	}
	if !status.Valid || !committed.Valid {
		return row{}, fmt.Errorf("row of token %d has no response", got.token)
	}
	got.resp.Status = int(status.Int32)
	if err := json.Unmarshal(headers, &got.resp.Headers); err != nil {
		return row{}, fmt.Errorf("decode the headers of token %d: %w", got.token, err)
	}
	return got, nil
}

// encode checks resp against what idemnode accepts and returns its headers
// as the row stores them.
func (r *Runner) encode(resp client.Response) ([]byte, error) {
	if err := checkResponse(resp, r.opts.MaxBody); err != nil {
		return nil, err
	}
	h := resp.Headers
	if h == nil {
		h = []client.Header{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode the response headers: %w", err)
	}
	return b, nil
}

// bytesOrEmpty keeps an empty value non-NULL, so a NULL in a column means a
// bug.
func bytesOrEmpty(b []byte) []byte {
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
