// Command postgres debits an account exactly once per payment, with the
// debit committed in PostgreSQL under an idemnode claim (contrib/idempg):
// run it twice with the same --payment and the second run replays the
// first one's receipt without debiting again, even if the first run died
// between its COMMIT and telling idemnode.
//
//	scripts/cluster.sh up 3
//	go run . --cluster 127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400 \
//	  --dsn 'host=/var/run/postgresql dbname=shop sslmode=disable' --payment p-1 --amount 250
//
// It creates its tables when missing: idempg's (idempg.Migrate) and an
// accounts table with one account.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "postgres:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("postgres", flag.ContinueOnError)
	cluster := fs.String("cluster", "127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400", "idemnode gRPC addresses, comma-separated")
	dsn := fs.String("dsn", "", "PostgreSQL connection string (pgx: keyword=value or a postgres:// URL)")
	tenant := fs.String("tenant", "demo", "the tenant the rows belong to: with --auth on the server, the tenant of your credentials")
	payment := fs.String("payment", "", "the payment's id: the idempotency key")
	amount := fs.Int64("amount", 0, "the amount to debit, in cents (positive)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *dsn == "":
		return errors.New("--dsn is required")
	case *tenant == "":
		return errors.New("--tenant is required: idempg keys its rows by tenant")
	case *payment == "":
		return errors.New("--payment is required")
	case *amount <= 0:
		return fmt.Errorf("--amount must be positive, got %d", *amount)
	}

	db, err := sql.Open("pgx", *dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := setup(ctx, db); err != nil {
		return err
	}
	cl, err := client.New(client.Config{Addrs: strings.Split(*cluster, ",")})
	if err != nil {
		return err
	}
	defer cl.Close()
	// The ID below leaves Tenant empty, as clients of a server with --auth
	// must; Options.Tenant tells idempg whose rows these are.
	payments, err := idempg.New(db, cl, idempg.Options{Tenant: *tenant})
	if err != nil {
		return err
	}

	id := client.ID{Scope: "payments/debit", Key: *payment}
	// The fingerprint says what the key is for: the same payment id with
	// another amount is a mistake (client.ErrMismatch), not a retry.
	fp := client.Fingerprint([]byte("debit"), fmt.Append(nil, *amount))
	res, err := payments.Do(ctx, id, fp, func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
		var balance int64
		err := tx.QueryRowContext(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = 'demo' RETURNING balance", *amount).Scan(&balance)
		if err != nil {
			return client.Response{}, err // transient: rolled back, the key released
		}
		if balance < 0 {
			// Permanent: rolled back, and this answer is what every retry gets.
			return client.Response{Status: 402, Body: []byte("insufficient funds\n")}, client.Permanent(errors.New("insufficient funds"))
		}
		receipt := fmt.Sprintf("debited %d for payment %s at %s; balance %d\n", *amount, *payment, time.Now().UTC().Format(time.RFC3339), balance)
		return client.Response{Status: 200, Body: []byte(receipt)}, nil
	})
	switch {
	case errors.Is(err, idempg.ErrCommitUnknown):
		return fmt.Errorf("%w; run again with the same --payment to find out", err)
	case err != nil && !client.IsPermanent(err):
		// Nothing was committed or recorded: res holds no response.
		return err
	}
	how := "ran now"
	if res.Replayed {
		how = "replayed: committed by an earlier run"
	}
	fmt.Printf("%d %s (%s)\n", res.Response.Status, strings.TrimSpace(string(res.Response.Body)), how)
	return nil
}

// setup creates idempg's table and the demo account when missing.
func setup(ctx context.Context, db *sql.DB) error {
	if err := idempg.Migrate(ctx, db, idempg.Options{}); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS accounts (id text PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO accounts VALUES ('demo', 10000) ON CONFLICT DO NOTHING`)
	if err != nil {
		return fmt.Errorf("create the accounts table: %w", err)
	}
	return nil
}
