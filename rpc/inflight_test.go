package rpc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// Calls one after another reuse one worker instead of a goroutine each.
func TestInflightReusesIdleWorkers(t *testing.T) {
	calls := newInflight()
	for range 50 {
		done := make(chan struct{})
		calls.start(func() { close(done) })
		<-done
		// Let the worker get back to waiting for the next call.
		testutil.WaitFor(t, 5*time.Second, "an idle worker", func() bool { return idleWorkerWaiting(calls) })
	}
	// Usually one worker runs them all. The probe above is itself a call: the
	// worker that ran it may not be back at its select when the next start
	// looks, and then start adds a worker (seen once in a test run on a busy
	// machine). Without reuse it would be 50.
	calls.mu.Lock()
	workers := calls.workers
	calls.mu.Unlock()
	if workers > 5 {
		t.Fatalf("50 calls in sequence started %d workers, want 1 (a few at most)", workers)
	}
	calls.closeAndWait()
}

// More calls than workers all run at once: a stream of waiting claims
// must not hold back the calls behind it.
func TestInflightRunsCallsBeyondTheWorkers(t *testing.T) {
	calls := newInflight()
	n := callWorkers + 20
	var running atomic.Int32
	release := make(chan struct{})
	for range n {
		calls.start(func() {
			running.Add(1)
			<-release
		})
	}
	testutil.WaitFor(t, 5*time.Second, "every call running at once", func() bool { return running.Load() == int32(n) })
	close(release)
	calls.closeAndWait()
}

// closeAndWait waits for the calls that run, and nothing starts after it.
func TestInflightCloseWaitsAndRefusesLateCalls(t *testing.T) {
	calls := newInflight()
	var finished atomic.Bool
	started := make(chan struct{})
	calls.start(func() {
		close(started)
		time.Sleep(50 * time.Millisecond)
		finished.Store(true)
	})
	<-started
	calls.closeAndWait()
	if !finished.Load() {
		t.Fatal("closeAndWait returned before its running call ended")
	}
	ran := make(chan struct{}, 1)
	calls.start(func() { ran <- struct{}{} })
	select {
	case <-ran:
		t.Fatal("a call started after closeAndWait ran")
	case <-time.After(50 * time.Millisecond):
	}
}

// idleWorkerWaiting reports whether a worker takes a no-op call at once,
// which it does only while it waits on idle.
func idleWorkerWaiting(calls *inflight) bool {
	done := make(chan struct{})
	select {
	case calls.idle <- func() { close(done) }:
		<-done
		return true
	default:
		return false
	}
}
