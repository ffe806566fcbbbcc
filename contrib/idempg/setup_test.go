package idempg_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
	"github.com/idemnode/idemnode/contrib/idempg/internal/pgtest"
	"github.com/idemnode/idemnode/internal/testcluster"
)

// env is one test's database, cluster and runner.
type env struct {
	dsn     string
	db      *sql.DB
	cluster *testcluster.Cluster
	cl      *client.Client
	r       *idempg.Runner
}

// effectsDDL is the business table the tests' function writes. It has no
// unique constraint on the key, so a second committed effect would show.
const effectsDDL = `CREATE TABLE effects (id bigserial PRIMARY KEY, k text NOT NULL, token bigint NOT NULL, holder text NOT NULL)`

// newEnv starts a 3-node cluster and a fresh database on the shared server
// with the helper's table and the effects table.
func newEnv(t *testing.T) *env { return newEnvOn(t, pgtest.Shared(t)) }

// newEnvOn is newEnv on the server srv, running ddls first.
func newEnvOn(t testing.TB, srv *pgtest.Server, ddls ...string) *env {
	t.Helper()
	dsn, db := srv.NewDB(t)
	db.SetMaxOpenConns(64)
	ctx := context.Background()
	if err := idempg.Migrate(ctx, db, idempg.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, ddl := range append(ddls, effectsDDL) {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	c := testcluster.Start(t, 3, testcluster.Options{})
	cl := newClient(t, addrs(c), nil)
	r, err := idempg.New(db, cl, idempg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &env{dsn: dsn, db: db, cluster: c, cl: cl, r: r}
}

func addrs(c *testcluster.Cluster) []string {
	var out []string
	for _, nd := range c.Nodes {
		out = append(out, nd.GRPCAddr())
	}
	return out
}

func newClient(t testing.TB, addrs []string, tune func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{Addrs: addrs, Lease: 2 * time.Second, Wait: 20 * time.Second}
	if tune != nil {
		tune(&cfg)
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// effect is the tests' side effect: one row in effects, and a response
// naming that row, so two runs give two different responses.
func effect(holder string) idempg.TxFunc {
	return func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
		run, _ := client.RunFrom(ctx)
		var id int64
		if err := tx.QueryRowContext(ctx, "INSERT INTO effects (k, token, holder) VALUES ($1, $2, $3) RETURNING id",
			run.ID().Key, int64(run.Token()), holder).Scan(&id); err != nil {
			return client.Response{}, err
		}
		return client.Response{Status: 201, Headers: []client.Header{{Name: "Effect", Value: fmt.Sprint(id)}},
			Body: fmt.Appendf(nil, "effect %d of %s by %s", id, run.ID().Key, holder)}, nil
	}
}

func testID(key string) client.ID { return client.ID{Tenant: "t", Scope: "POST /effects", Key: key} }

var fingerprint = client.Fingerprint([]byte("effects"))

// checkEffects fails t unless every key has exactly one committed effect,
// one row in the helper's table, and every response got for it is the one
// naming that effect.
func checkEffects(t *testing.T, db *sql.DB, got map[string][]string) {
	t.Helper()
	ctx := context.Background()
	effects := map[string][]int64{}
	rows, err := db.QueryContext(ctx, "SELECT k, id FROM effects")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		effects[k] = append(effects[k], id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var fenceRows int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM idempg_effects WHERE status IS NOT NULL").Scan(&fenceRows); err != nil {
		t.Fatal(err)
	}
	if fenceRows != len(got) {
		t.Errorf("%d rows in idempg_effects, want one per key (%d)", fenceRows, len(got))
	}
	bad := 0
	for k, bodies := range got {
		ids := effects[k]
		if len(ids) != 1 {
			bad++
			t.Errorf("key %s: %d committed effects %v, want exactly 1", k, len(ids), ids)
			continue
		}
		want := fmt.Sprintf("effect %d of %s ", ids[0], k)
		for _, b := range bodies {
			if !strings.HasPrefix(b, want) {
				bad++
				t.Errorf("key %s: a caller got %q, want the committed %q...", k, b, want)
			}
		}
		if bad > 20 {
			t.Fatal("too many failures")
		}
	}
	for k := range effects {
		if _, ok := got[k]; !ok {
			t.Errorf("effect of key %s that no caller asked for", k)
		}
	}
}
