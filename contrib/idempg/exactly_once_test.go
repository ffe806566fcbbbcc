package idempg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
)

// TestExactlyOnceUnderRacesAndFailover runs 1 000 keys, each through three
// racing callers that retry until they get a response, crashes idemnode's
// leader a third of the way in, and checks that every key's effect was
// committed exactly once and that all its callers got the response that
// committed it.
func TestExactlyOnceUnderRacesAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("1 000 keys and a leader crash against PostgreSQL")
	}
	e := newEnv(t)
	const keys, callers, workers = 1000, 3, 48
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
				for {
					res, err := e.r.Do(ctx, testID(c.key), fingerprint, effect(holder), client.WithWait(15*time.Second))
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
	t.Logf("%d calls over %d keys (%d ran the function, %d replayed), %d retried after an error",
		done.Load(), len(got), executed.Load(), replayed.Load(), retries.Load())
	if executed.Load() != keys {
		t.Errorf("%d calls ran the function and committed, want one per key (%d)", executed.Load(), keys)
	}
	if len(got) != keys {
		t.Fatalf("%d keys answered, want %d", len(got), keys)
	}
	checkEffects(t, e.db, got)
}
