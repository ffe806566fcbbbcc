package idempg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults of Options.
const (
	DefaultSchema = "public"
	DefaultTable  = "idempg_effects"
)

// maxIdentifier is PostgreSQL's NAMEDATALEN-1: longer names are truncated
// silently, which could make two configured tables one.
const maxIdentifier = 63

// Options name the table and shape the transactions.
type Options struct {
	// Schema and Table name the table of committed effects (default
	// public.idempg_effects). They are quoted as given: "Effects" and
	// "effects" are two tables.
	Schema string
	Table  string
	// TxOptions are passed to BeginTx (nil: the database's default
	// isolation, READ COMMITTED unless configured otherwise).
	TxOptions *sql.TxOptions
	// Tenant is the tenant whose keys this Runner's rows belong to when an
	// ID leaves Tenant empty, as the SDK asks of clients of a server with
	// authentication on (the server takes the tenant from the
	// credentials, which the database cannot see). Rows are keyed
	// (tenant, scope, key), so a Runner needs a tenant for every call: Do
	// refuses an ID with an empty Tenant when Tenant is empty, and an ID
	// whose Tenant differs from a non-empty Tenant. Set it to the tenant
	// of the client's credentials.
	Tenant string
	// MaxBody is the largest response body idemnode accepts (the
	// server's Limits.MaxBody); 0 means idemnode's default, 1 MiB. Do
	// refuses a larger response before COMMIT.
	MaxBody int
}

// table is the quoted, schema-qualified name of the table and the
// statements on it, built once.
type table struct {
	name                     string
	fence, record, find      string
	recordAlone, purge, ddls string
}

func newTable(opts Options) (table, error) {
	schema, name := opts.Schema, opts.Table
	if schema == "" {
		schema = DefaultSchema
	}
	if name == "" {
		name = DefaultTable
	}
	for _, n := range []string{schema, name} {
		if len(n) > maxIdentifier || strings.ContainsRune(n, 0) {
			return table{}, fmt.Errorf("idempg: invalid identifier %q: at most %d bytes, no NUL", n, maxIdentifier)
		}
	}
	q := pgx.Identifier{schema, name}.Sanitize()
	const cols = "tenant, scope, key"
	const match = "tenant = $1 AND scope = $2 AND key = $3"
	return table{
		name: q,
		// The fence: the first statement of every transaction that may run
		// the function. It waits for a concurrent holder's uncommitted row.
		fence: "INSERT INTO " + q + " (" + cols + ", token, fingerprint) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (" + cols + ") DO NOTHING",
		// The response, written into the row this transaction inserted.
		record: "UPDATE " + q + " SET status = $5, headers = $6, body = $7, committed_at = now() WHERE " + match + " AND token = $4",
		find:   "SELECT token, fingerprint, status, headers, body, committed_at FROM " + q + " WHERE " + match,
		// A permanent failure's response, in a transaction of its own: the
		// function's writes were rolled back.
		recordAlone: "INSERT INTO " + q + " (" + cols + ", token, fingerprint, status, headers, body, committed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now()) ON CONFLICT (" + cols + ") DO NOTHING",
		purge:       "DELETE FROM " + q + " WHERE committed_at < $1",
		ddls: "CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{schema}.Sanitize() + ";\n" +
			"CREATE TABLE IF NOT EXISTS " + q + " (\n" +
			"\ttenant       text        NOT NULL,\n" +
			"\tscope        text        NOT NULL,\n" +
			"\tkey          text        NOT NULL,\n" +
			"\t-- the fencing token of the claim whose transaction committed the row\n" +
			"\ttoken        bigint      NOT NULL,\n" +
			"\t-- the request's fingerprint: the key with another is client.ErrMismatch\n" +
			"\tfingerprint  bytea       NOT NULL,\n" +
			"\t-- the response; NULL only inside the transaction that inserted the row\n" +
			"\tstatus       integer,\n" +
			"\theaders      jsonb,\n" +
			"\tbody         bytea,\n" +
			"\tcommitted_at timestamptz,\n" +
			"\tPRIMARY KEY (" + cols + ")\n" +
			");\n",
	}, nil
}

// MigrationSQL returns the statements Migrate runs for opts, for a
// migration tool of your own.
func MigrationSQL(opts Options) (string, error) {
	t, err := newTable(opts)
	if err != nil {
		return "", err
	}
	return t.ddls, nil
}

// Migrate creates the schema and the table named by opts when they do not
// exist. It is safe to run again; run it once at deployment, not from
// several processes at once (PostgreSQL's IF NOT EXISTS is not atomic
// against a concurrent CREATE).
func Migrate(ctx context.Context, db *sql.DB, opts Options) error {
	if db == nil {
		return errors.New("idempg: migrate: nil *sql.DB")
	}
	t, err := newTable(opts)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, t.ddls); err != nil {
		return fmt.Errorf("idempg: migrate %s: %w", t.name, err)
	}
	return nil
}

// Purge deletes the rows committed before before and returns how many. Keep
// rows at least as long as idemnode keeps the keys' records (their TTL, and
// tombstones when the cluster keeps them): a key whose row is gone while its
// record is not completed runs again.
func (r *Runner) Purge(ctx context.Context, before time.Time) (int64, error) {
	res, err := r.db.ExecContext(ctx, r.t.purge, before)
	if err != nil {
		return 0, fmt.Errorf("idempg: purge %s: %w", r.t.name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("idempg: purge %s: %w", r.t.name, err)
	}
	return n, nil
}
