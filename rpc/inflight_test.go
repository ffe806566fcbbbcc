package rpc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// Calls one after another reuse one worker instead of a goroutine each.
func TestInflightReusesIdleWorkers(t *testing.T) {
	calls := newForwardLanes(0).commits
	for range 50 {
		done := make(chan struct{})
		calls.start(func() { close(done) })
		<-done
		// Let the worker get back to waiting for the next call.
		testutil.Eventually(t, 5*time.Second, "an idle worker", func() bool { return idleWorkerWaiting(calls) })
	}
	// One worker runs them all: a worker counts itself idle before the next
	// start looks, and takes the call handed to it. Without reuse it would
	// be 50.
	calls.mu.Lock()
	workers := calls.workers
	calls.mu.Unlock()
	if workers > 5 {
		t.Fatalf("50 calls in sequence started %d workers, want 1 (a few at most)", workers)
	}
	calls.closeAndWait()
}

// More waiting claims than the commit lane has workers all run at once,
// and a call of the commit lane runs beside them: a stream of waiting
// claims must not hold back the calls behind it.
func TestInflightRunsCallsBeyondTheWorkers(t *testing.T) {
	lanes := newForwardLanes(0)
	n := callWorkers + 20
	var running atomic.Int32
	release := make(chan struct{})
	for range n {
		lanes.waits.start(func() {
			running.Add(1)
			<-release
		})
	}
	testutil.Eventually(t, 5*time.Second, "every call running at once", func() bool { return running.Load() == int32(n) })
	committed := make(chan struct{})
	lanes.commits.start(func() { close(committed) })
	select {
	case <-committed:
	case <-time.After(5 * time.Second):
		t.Fatal("a call of the commit lane did not run beside the waits")
	}
	close(release)
	lanes.closeAndWait()
}

// closeAndWait waits for the calls that run, and nothing starts after it.
func TestInflightCloseWaitsAndRefusesLateCalls(t *testing.T) {
	calls := newForwardLanes(0).commits
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

// idleWorkerWaiting reports whether a worker waits on the queue.
func idleWorkerWaiting(calls *inflight) bool {
	calls.mu.Lock()
	defer calls.mu.Unlock()
	return calls.idle > 0
}
