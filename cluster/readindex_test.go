package cluster

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedConfirmer's confirmations block until released, and count.
type gatedConfirmer struct {
	confirmer
	started chan int
	release chan struct{}
	rounds  atomic.Int32
}

func newGatedConfirmer() *gatedConfirmer {
	g := &gatedConfirmer{started: make(chan int, 100), release: make(chan struct{})}
	g.confirm = func() error {
		g.started <- int(g.rounds.Add(1))
		<-g.release
		return nil
	}
	return g
}

// TestReadsJoinOnlyARoundThatStartsAfterThem: a read that arrives while a
// confirmation is in flight is answered by the next one, never by the one
// that started before it.
func TestReadsJoinOnlyARoundThatStartsAfterThem(t *testing.T) {
	g := newGatedConfirmer()
	first := make(chan error, 1)
	go func() { first <- g.wait(context.Background()) }()
	if r := <-g.started; r != 1 {
		t.Fatalf("round %d started, want 1", r)
	}
	second := make(chan error, 1)
	go func() { second <- g.wait(context.Background()) }()
	// The second read waits for a round of its own, not yet started.
	for {
		g.mu.Lock()
		queued := g.next != nil
		g.mu.Unlock()
		if queued {
			break
		}
		runtime.Gosched()
	}
	g.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case <-second:
		t.Fatal("a read that arrived during round 1 was answered by round 1")
	case r := <-g.started:
		if r != 2 {
			t.Fatalf("round %d started, want 2", r)
		}
	}
	g.release <- struct{}{}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentReadsShareConfirmations: reads arriving together share a
// round instead of one confirmation each.
func TestConcurrentReadsShareConfirmations(t *testing.T) {
	g := newGatedConfirmer()
	go func() {
		for range g.started {
			time.Sleep(5 * time.Millisecond)
			g.release <- struct{}{}
		}
	}()
	const reads = 200
	var wg sync.WaitGroup
	for range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.wait(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(g.started)
	if n := g.rounds.Load(); n >= reads/2 {
		t.Fatalf("%d reads took %d confirmations", reads, n)
	} else {
		t.Logf("%d reads took %d confirmations", reads, n)
	}
}
