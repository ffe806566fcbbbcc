package idempg_test

import (
	"context"
	"database/sql"
	"errors"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// intercept returns a client option that runs f around every unary call.
func intercept(f grpc.UnaryClientInterceptor) func(*client.Config) {
	return func(cfg *client.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(f))
	}
}

// drop returns a client option that fails every call of method with
// Unavailable, as a network that loses them does.
func drop(method string) func(*client.Config) {
	return intercept(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if m == method {
			return status.Error(codes.Unavailable, "test: "+path.Base(method)+" dropped")
		}
		return invoker(ctx, m, req, reply, cc, opts...)
	})
}

// completeLostRunner is a runner on e's table whose Complete calls never
// reach idemnode, with a 1 s lease: as if each holder died after COMMIT.
func completeLostRunner(t *testing.T, e *env) *idempg.Runner {
	t.Helper()
	lost := newClient(t, addrs(e.cluster), func(cfg *client.Config) {
		cfg.Lease, cfg.FinishTimeout = time.Second, 300*time.Millisecond
		drop(idempb.Idempotency_Complete_FullMethodName)(cfg)
	})
	r, err := idempg.New(e.db, lost, idempg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDoRunsOnceAndReplays(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := testID("once")
	first, err := e.r.Do(ctx, id, fingerprint, effect("first"))
	if err != nil || !first.Executed || first.Replayed {
		t.Fatalf("first Do: %+v, %v; want executed", first, err)
	}
	second, err := e.r.Do(ctx, id, fingerprint, effect("second"))
	if err != nil || !second.Replayed || second.Executed {
		t.Fatalf("second Do: %+v, %v; want replayed", second, err)
	}
	if string(second.Response.Body) != string(first.Response.Body) || second.Response.Status != 201 ||
		len(second.Response.Headers) != 1 || second.Response.Headers[0] != first.Response.Headers[0] {
		t.Fatalf("replayed %+v, want %+v", second.Response, first.Response)
	}
	var token int64
	if err := e.db.QueryRowContext(ctx, "SELECT token FROM idempg_effects WHERE key = 'once'").Scan(&token); err != nil || token <= 0 {
		t.Fatalf("the row's token: %d, %v", token, err)
	}
	checkEffects(t, e.db, map[string][]string{"once": {string(first.Response.Body), string(second.Response.Body)}})
}

// TestCommittedButNotCompleted: a holder commits but its Complete never
// reaches idemnode (as if it died right after COMMIT). Its caller still gets
// the committed response, and the next holder, once the lease ran out,
// finds the row and completes the key with it instead of running again.
func TestCommittedButNotCompleted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := completeLostRunner(t, e)
	id := testID("lost-complete")
	first, err := r.Do(ctx, id, fingerprint, effect("first"))
	if err != nil || !first.Executed {
		t.Fatalf("Do whose Complete is lost: %+v, %v; want executed, no error", first, err)
	}
	rec, err := e.cl.Get(ctx, id)
	if err != nil || rec.State != client.StatePending {
		t.Fatalf("record after the lost Complete: %+v, %v; want PENDING", rec, err)
	}
	// The next holder waits out the lease, finds the row and completes.
	second, err := e.r.Do(ctx, id, fingerprint, effect("second"), client.WithWait(10*time.Second))
	if err != nil || !second.Replayed || second.Executed {
		t.Fatalf("takeover: %+v, %v; want replayed from the row", second, err)
	}
	third, err := e.r.Do(ctx, id, fingerprint, effect("third"))
	if err != nil || !third.Replayed {
		t.Fatalf("after the takeover completed: %+v, %v", third, err)
	}
	if rec, err := e.cl.Get(ctx, id); err != nil || rec.State != client.StateCompleted {
		t.Fatalf("record after the takeover: %+v, %v; want COMPLETED", rec, err)
	}
	checkEffects(t, e.db, map[string][]string{id.Key: {
		string(first.Response.Body), string(second.Response.Body), string(third.Response.Body)}})
}

func TestPermanentFailureIsRecorded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	declined := errors.New("card declined")
	fn := func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (k, token, holder) VALUES ('declined', 0, 'x')"); err != nil {
			return client.Response{}, err
		}
		return client.Response{Status: 402, Body: []byte("declined")}, client.Permanent(declined)
	}
	id := testID("declined")
	res, err := e.r.Do(ctx, id, fingerprint, fn)
	if !errors.Is(err, declined) || !res.Executed || res.Response.Status != 402 {
		t.Fatalf("Do: %+v, %v; want the permanent failure, executed", res, err)
	}
	var n int
	if err := e.db.QueryRowContext(ctx, "SELECT count(*) FROM effects").Scan(&n); err != nil || n != 0 {
		t.Fatalf("effects after a permanent failure: %d, %v; want 0 (rolled back)", n, err)
	}
	var status int
	if err := e.db.QueryRowContext(ctx, "SELECT status FROM idempg_effects WHERE key = 'declined'").Scan(&status); err != nil || status != 402 {
		t.Fatalf("the recorded row: %d, %v; want 402", status, err)
	}
	again, err := e.r.Do(ctx, id, fingerprint, effect("again"))
	if err != nil || !again.Replayed || again.Response.Status != 402 || string(again.Response.Body) != "declined" {
		t.Fatalf("retry: %+v, %v; want the 402 replayed", again, err)
	}
}

func TestTransientFailureReleases(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	timeout := errors.New("dependency timed out")
	id := testID("transient")
	res, err := e.r.Do(ctx, id, fingerprint, func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
		if _, err := effect("failing")(ctx, tx); err != nil {
			return client.Response{}, err
		}
		return client.Response{}, timeout
	})
	if !errors.Is(err, timeout) || res.Executed {
		t.Fatalf("Do: %+v, %v; want the transient error, nothing committed", res, err)
	}
	if _, err := e.cl.Get(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("record after a transient failure: %v; want released (not found)", err)
	}
	retry, err := e.r.Do(ctx, id, fingerprint, effect("retry"))
	if err != nil || !retry.Executed {
		t.Fatalf("retry: %+v, %v; want executed", retry, err)
	}
	checkEffects(t, e.db, map[string][]string{id.Key: {string(retry.Response.Body)}})
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := idempg.New(nil, e.cl, idempg.Options{}); err == nil {
		t.Error("New(nil db) succeeded")
	}
	long := strings.Repeat("x", 64)
	if _, err := idempg.New(e.db, e.cl, idempg.Options{Table: long}); err == nil || !strings.Contains(err.Error(), "at most 63") {
		t.Errorf("New with a 64-byte table name: %v", err)
	}
	if err := idempg.Migrate(ctx, e.db, idempg.Options{Schema: long}); err == nil {
		t.Error("Migrate with a 64-byte schema name succeeded")
	}
	if _, err := e.r.Do(ctx, testID("nil-fn"), fingerprint, nil); err == nil {
		t.Error("Do(nil fn) succeeded")
	}
	if _, err := e.cl.Get(ctx, testID("nil-fn")); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Do(nil fn) left a record: %v", err)
	}
	// A table that was never migrated: the fence fails, nothing commits and
	// the key is released.
	r, err := idempg.New(e.db, e.cl, idempg.Options{Table: "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do(ctx, testID("no-table"), fingerprint, effect("x")); err == nil || !strings.Contains(err.Error(), "fence") {
		t.Errorf("Do on a missing table: %v; want the fence's error", err)
	}
	if _, err := e.cl.Get(ctx, testID("no-table")); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Do on a missing table left a record: %v", err)
	}
}

func TestMigrateCustomTable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	opts := idempg.Options{Schema: "Idem", Table: "Fence"}
	for range 2 { // again: IF NOT EXISTS
		if err := idempg.Migrate(ctx, e.db, opts); err != nil {
			t.Fatal(err)
		}
	}
	r, err := idempg.New(e.db, e.cl, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do(ctx, testID("custom"), fingerprint, effect("x")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := e.db.QueryRowContext(ctx, `SELECT count(*) FROM "Idem"."Fence"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf(`rows in "Idem"."Fence": %d, %v`, n, err)
	}
	if removed, err := r.Purge(ctx, time.Now().Add(time.Hour)); err != nil || removed != 1 {
		t.Fatalf("Purge: %d, %v; want 1", removed, err)
	}
}

// TestStaleHolderCommitsFirst: holder A's lease runs out while its
// transaction is open (its extensions are lost), B takes the key over and
// its fence waits for A's row lock; A then commits. B must not run the
// function: it replays A's committed response, under READ COMMITTED (its
// INSERT sees the conflict) and REPEATABLE READ (its INSERT fails to
// serialize and the row is read outside the transaction).
func TestStaleHolderCommitsFirst(t *testing.T) {
	for _, iso := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
		t.Run(iso.String(), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			opts := idempg.Options{TxOptions: &sql.TxOptions{Isolation: iso}}
			stale := newClient(t, addrs(e.cluster), func(cfg *client.Config) {
				cfg.Lease = time.Second
				drop(idempb.Idempotency_Extend_FullMethodName)(cfg)
			})
			ra, err := idempg.New(e.db, stale, opts)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := idempg.New(e.db, e.cl, opts)
			if err != nil {
				t.Fatal(err)
			}
			id := testID("stale-first")
			inFn, release := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			var a idempg.Result
			var aErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, aErr = ra.Do(ctx, id, fingerprint, func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
					resp, err := effect("stale")(ctx, tx)
					close(inFn)
					<-release
					return resp, err
				})
			}()
			<-inFn
			var b idempg.Result
			var bErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, bErr = rb.Do(ctx, id, fingerprint, effect("new"), client.WithWait(10*time.Second))
			}()
			// B holds the claim and waits on A's row lock.
			testutil.Eventually(t, 20*time.Second, "the new holder's fence waiting on the stale holder's row", func() error {
				var n int
				err := e.db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO%idempg_effects%'").Scan(&n)
				if err == nil && n != 1 {
					err = errors.New("not waiting yet")
				}
				return err
			})
			close(release)
			wg.Wait()
			if aErr != nil || !a.Executed {
				t.Fatalf("stale holder: %+v, %v; want its commit to stand", a, aErr)
			}
			if bErr != nil || !b.Replayed || b.Executed {
				t.Fatalf("new holder: %+v, %v; want the stale holder's response replayed", b, bErr)
			}
			checkEffects(t, e.db, map[string][]string{id.Key: {string(a.Response.Body), string(b.Response.Body)}})
		})
	}
}
