package idempg_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
	"github.com/idemnode/idemnode/internal/testutil"
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
//
// Two holder processes join the run with 8 keys each: one frozen with
// SIGSTOP inside its transactions, its extensions lost, resumed after the
// leader crash once every key's takeover waits on its rows; one killed
// with SIGKILL after its COMMITs and before any Complete. Their keys are
// taken over by two racing callers each while the run goes on.
func TestExactlyOnceUnderRacesAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("1 000 keys and a leader crash against PostgreSQL")
	}
	e := newEnv(t)
	const keys, callers, workers, staleEvery = 1000, 3, 48, 10
	stale := newStaleRunner(t, e)
	var overtaken atomic.Int64
	procs := startProcessHolders(t, e)
	type call struct {
		key string
		n   int
	}
	// A stale key's claimed closes when its stale holder runs fn, so it
	// holds the claim: the key's other callers start after it, and the
	// takeover, not the first claim, decides who commits.
	type staleKey struct {
		claimed chan struct{}
		once    sync.Once
	}
	staleKeys := map[string]*staleKey{}
	for k := 0; k < keys; k += staleEvery {
		staleKeys[fmt.Sprintf("k%04d", k)] = &staleKey{claimed: make(chan struct{})}
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
				if sk, isStale := staleKeys[c.key]; isStale && c.n == 0 {
					stalled := stallUntilOvertaken(e.db, fn, &overtaken)
					r, fn = stale, func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
						sk.once.Do(func() { close(sk.claimed) })
						return stalled(ctx, tx)
					}
				} else if isStale {
					select {
					case <-sk.claimed:
					case <-time.After(30 * time.Second): // the count of overtaken holders below tells
					}
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
	procGot := procs.finish(t, e, crashed)
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
	for k, bodies := range procGot {
		got[k] = bodies
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

// frozenApp names the frozen holder process's connections, so the test can
// see who waits on them.
const frozenApp = "idempg-frozen-holder"

// processHolders are the holder processes of the 1 000-key run and the
// takeovers of their keys.
type processHolders struct {
	frozen             *holder
	frozenKeys, killed []string
	done               chan struct{}
	mu                 sync.Mutex
	got                map[string][]string
	errs               []error
}

// startProcessHolders starts a frozen and a killed holder process, waits
// until each has reached its point, and starts two racing takeovers of each
// of their keys.
func startProcessHolders(t *testing.T, e *env) *processHolders {
	t.Helper()
	p := &processHolders{frozenKeys: holderKeys("run-frozen", 8), killed: holderKeys("run-killed", 8),
		done: make(chan struct{}), got: map[string][]string{}}
	p.frozen = startHolder(t, e, stopInFnPartitioned, e.dsn+" application_name="+frozenApp, p.frozenKeys)
	p.frozen.awaitReady(t, len(p.frozenKeys))
	if err := p.frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	k := startHolder(t, e, killAfterCommit, e.dsn, p.killed)
	k.awaitReady(t, len(p.killed))
	for range k.lines {
	}
	if err := <-k.done; err == nil {
		t.Fatal("the killed holder process exited by itself")
	}
	var wg sync.WaitGroup
	for _, k := range append(p.frozenKeys, p.killed...) {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, err := untilAnswered(e, k)
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.errs = append(p.errs, err)
					return
				}
				p.got[k] = append(p.got[k], body)
			}()
		}
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return p
}

// untilAnswered calls Do for key until it returns a response, as an
// application retries: a takeover whose fence waits through the leader
// crash may lose its own lease and be fenced.
func untilAnswered(e *env, key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		res, err := e.r.Do(ctx, testID(key), fingerprint, effect("takeover"), client.WithWait(30*time.Second))
		if err == nil {
			return string(res.Response.Body), nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("takeover of %s: %w", key, err)
		}
		time.Sleep(time.Duration(rand.N(50)) * time.Millisecond)
	}
}

// finish resumes the frozen process after the leader crash, once a takeover
// of each of its keys waits on its rows, and returns what every caller of
// the processes' keys got.
func (p *processHolders) finish(t *testing.T, e *env, crashed <-chan struct{}) map[string][]string {
	t.Helper()
	<-crashed
	testutil.Eventually(t, 60*time.Second, "a takeover waiting on each of the frozen process's rows", func() error {
		var n int
		err := e.db.QueryRow(`SELECT count(*) FROM pg_stat_activity w WHERE EXISTS (SELECT 1 FROM pg_stat_activity b
			WHERE b.pid = ANY (pg_blocking_pids(w.pid)) AND b.application_name = $1)`, frozenApp).Scan(&n)
		if err == nil && n < len(p.frozenKeys) {
			err = fmt.Errorf("%d of %d waiting", n, len(p.frozenKeys))
		}
		return err
	})
	stale := p.frozen.results(t)
	<-p.done
	for _, err := range p.errs {
		t.Error(err)
	}
	for _, k := range p.frozenKeys {
		p.got[k] = append(p.got[k], stale[k])
	}
	return p.got
}
