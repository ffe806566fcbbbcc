package idempg_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestExactlyOnceUnderRacesAndFailover runs 1 000 keys, each through three
// racing callers that retry until they get a response, crashes idemnode's
// leader a third of the way in, and checks that every key's effect was
// committed exactly once and that all its callers got the response that
// committed it.
//
// On every tenth key the first caller is a stale holder: its lease
// extensions are lost, and its function, after writing its effect, waits
// until another caller has taken the key over and that caller's fence waits
// on this transaction's row lock; then it commits. Only the fence stops the
// takeover from running the function a second time.
func TestExactlyOnceUnderRacesAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("1 000 keys and a leader crash against PostgreSQL")
	}
	e := newEnv(t)
	const keys, callers, workers, staleEvery = 1000, 3, 48, 10
	stale := newStaleRunner(t, e)
	var overtaken atomic.Int64
	type call struct {
		key string
		n   int
	}
	work := make(chan call)
	go func() {
		defer close(work)
		for k := range keys {
			for n := range callers {
				work <- call{fmt.Sprintf("k%04d", k), n}
			}
		}
	}()
	var (
		mu      sync.Mutex
		got     = map[string][]string{}
		done    atomic.Int64
		retries atomic.Int64
		// How calls were answered: ran the function, or replayed.
		executed, replayed atomic.Int64
		crashed            = make(chan struct{})
	)
	go func() {
		for done.Load() < keys*callers/3 {
			time.Sleep(5 * time.Millisecond)
		}
		leader := e.cluster.WaitLeader(30 * time.Second)
		t.Logf("crashing the leader %s after %d calls", leader.ID, done.Load())
		e.cluster.Crash(leader)
		close(crashed)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				holder := fmt.Sprintf("caller %d", c.n)
				r, fn := e.r, effect(holder)
				if isStale := c.key[len(c.key)-1] == '0'; isStale && c.n == 0 {
					r, fn = stale, stallUntilOvertaken(e.db, fn, &overtaken)
				} else if isStale {
					// Let the stale holder claim first.
					time.Sleep(300 * time.Millisecond)
				}
				for {
					res, err := r.Do(ctx, testID(c.key), fingerprint, fn, client.WithWait(15*time.Second))
					if err == nil {
						if res.Executed {
							executed.Add(1)
						} else if res.Replayed {
							replayed.Add(1)
						}
						mu.Lock()
						got[c.key] = append(got[c.key], string(res.Response.Body))
						mu.Unlock()
						break
					}
					if ctx.Err() != nil {
						t.Errorf("key %s: %v", c.key, err)
						return
					}
					// What an application does: the same key again.
					retries.Add(1)
					time.Sleep(time.Duration(rand.N(50)) * time.Millisecond)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	select {
	case <-crashed:
	default:
		t.Fatal("the leader was never crashed")
	}
	t.Logf("%d calls over %d keys (%d ran the function, %d replayed), %d retried after an error; %d of %d stale holders committed with a takeover waiting on their row",
		done.Load(), len(got), executed.Load(), replayed.Load(), retries.Load(), overtaken.Load(), keys/staleEvery)
	if overtaken.Load() < keys/staleEvery/2 {
		t.Errorf("only %d stale holders were overtaken before committing; the run did not exercise the fence", overtaken.Load())
	}
	if executed.Load() != keys {
		t.Errorf("%d calls ran the function and committed, want one per key (%d)", executed.Load(), keys)
	}
	if len(got) != keys {
		t.Fatalf("%d keys answered, want %d", len(got), keys)
	}
	checkEffects(t, e.db, got)
}

// newStaleRunner is a runner on e's table whose client loses every lease
// extension, with a 1 s lease: its holders go stale while they run.
func newStaleRunner(t *testing.T, e *env) *idempg.Runner {
	t.Helper()
	cl := newClient(t, addrs(e.cluster), func(cfg *client.Config) {
		cfg.Lease = time.Second
		drop(idempb.Idempotency_Extend_FullMethodName)(cfg)
	})
	r, err := idempg.New(e.db, cl, idempg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stallUntilOvertaken runs fn, then waits (up to 20 s) until another
// transaction waits for this one, as a takeover's fence does on the row
// this transaction inserted, and counts it in overtaken.
func stallUntilOvertaken(db *sql.DB, fn idempg.TxFunc, overtaken *atomic.Int64) idempg.TxFunc {
	return func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
		resp, err := fn(ctx, tx)
		if err != nil {
			return resp, err
		}
		var xid string
		if err := tx.QueryRowContext(ctx, "SELECT pg_current_xact_id()::text").Scan(&xid); err != nil {
			return resp, err
		}
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			var waiting bool
			err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND transactionid::text = $1 AND NOT granted)", xid).Scan(&waiting)
			if err != nil {
				return resp, err
			}
			if waiting {
				overtaken.Add(1)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return resp, nil
	}
}
