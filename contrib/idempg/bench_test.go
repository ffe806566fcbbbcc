package idempg_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg/internal/pgtest"
)

// BenchmarkEffect runs one effect per fresh key: a transaction inserting
// one row (bare), the same insert under idempg's Runner.Do, and the bare
// transaction under client.Do (idemnode's claim and completion around it,
// no fence). The later variant runs on a cluster with a longer log, which
// costs it time: compare runs in both orders (the journal does). PostgreSQL
// counts the statements each ran (pg_stat_statements, BEGIN and COMMIT
// included), reported per operation as stmts/op and begins/op.
func BenchmarkEffect(b *testing.B) {
	srv, err := pgtest.Start("shared_preload_libraries=pg_stat_statements")
	pgtest.Require(b, err)
	b.Cleanup(srv.Stop)
	e := newEnvOn(b, srv, "CREATE EXTENSION pg_stat_statements")
	ctx, db, cl, r := context.Background(), e.db, e.cl, e.r
	var seq atomic.Int64
	key := func() client.ID { return testID(fmt.Sprintf("bench-%d", seq.Add(1))) }
	// bareTx is the effect in a transaction of its own, as without idemnode.
	bareTx := func(ctx context.Context) (client.Response, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return client.Response{}, err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (k, token, holder) VALUES ($1, 0, 'bench')", "k"); err != nil {
			return client.Response{}, err
		}
		return client.Response{Status: 201}, tx.Commit()
	}
	cases := []struct {
		name string
		op   func() error
	}{
		{"bare", func() error { _, err := bareTx(ctx); return err }},
		{"idempg", func() error {
			_, err := r.Do(ctx, key(), fingerprint, func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
				_, err := tx.ExecContext(ctx, "INSERT INTO effects (k, token, holder) VALUES ($1, 0, 'bench')", "k")
				return client.Response{Status: 201}, err
			})
			return err
		}},
		{"client.Do", func() error { _, err := cl.Do(ctx, key(), fingerprint, bareTx); return err }},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			if err := bc.op(); err != nil { // warm the pool and the statement cache
				b.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if err := bc.op(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var stmts, begins float64
			if err := db.QueryRowContext(ctx, `SELECT coalesce(sum(calls), 0), coalesce(sum(calls) FILTER (WHERE query ILIKE 'begin%'), 0)
				FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
				AND query NOT ILIKE '%pg_stat_statements%'`).Scan(&stmts, &begins); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(stmts/float64(b.N), "stmts/op")
			b.ReportMetric(begins/float64(b.N), "begins/op")
		})
	}
}
