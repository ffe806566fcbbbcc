package idemnats_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// effectHandler applies each message's effect once per call.
func effectHandler(fx *effects) consume.Handler {
	return func(ctx context.Context, m consume.Message) ([]byte, error) {
		fx.apply(m.Header(nats.MsgIdHdr))
		return []byte("done"), nil
	}
}

// TestCompetingConsumersAcrossLeaderFailover runs three workers on one
// durable consumer and crashes idemnode's leader a third of the way through:
// every message's effect happens exactly once and every message is
// acknowledged.
func TestCompetingConsumersAcrossLeaderFailover(t *testing.T) {
	e := newOwnEnv(t)
	const name, n = "COMPETE", 300
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 5 * time.Second})
	fx := newEffects(n)
	var done atomic.Int32
	third := make(chan struct{})
	h := func(ctx context.Context, m consume.Message) ([]byte, error) {
		fx.apply(m.Header(nats.MsgIdHdr))
		if done.Add(1) == n/3 {
			close(third)
		}
		return []byte("done"), nil
	}
	for range 3 {
		e.startWorker(t, name, consume.Config{}, h, nil)
	}
	ids := e.publish(t, name, 0, n)
	select {
	case <-third:
	case <-time.After(60 * time.Second):
		t.Fatal("a third of the messages did not have their effect within 60s")
	}
	old := e.cluster.WaitLeader(10 * time.Second)
	e.cluster.Crash(old)
	if next := e.cluster.WaitLeader(30 * time.Second); next == old {
		t.Fatalf("leadership stayed on %s", old.ID)
	}
	fx.await(t, 60*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if got := done.Load(); got != n {
		t.Errorf("the handler ran %d times for %d messages", got, n)
	}
}

// TestKilledConsumerMidMessage kills a worker while its handler runs, before
// the effect: JetStream redelivers the message to a survivor, which finds the
// key held until the dead worker's lease lapses, then takes it over and
// applies the effect once.
func TestKilledConsumerMidMessage(t *testing.T) {
	e := newEnv(t)
	const name = "KILLED"
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: time.Second})
	fx := newEffects(40)
	ids := e.killMidMessage(t, name)
	victimID := ids[0]

	var held atomic.Int32
	wrap := func(m jetstream.Msg) jetstream.Msg {
		if keyOf(m) == victimID {
			held.Add(1)
		}
		return m
	}
	for range 2 {
		e.startWorker(t, name, consume.Config{}, effectHandler(fx), wrap)
	}
	ids = append(ids, e.publish(t, name, 1, 39)...)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if held.Load() < 1 {
		t.Errorf("the killed worker's message was not redelivered to a survivor")
	}
}

// killMidMessage publishes one message to consumer name and kills the
// worker running its handler before the effect, as a crash would; the
// message's key stays held until that worker's lease lapses.
func (e *env) killMidMessage(t *testing.T, name string) []string {
	t.Helper()
	started := make(chan struct{})
	var once sync.Once
	victim := e.startWorker(t, name, consume.Config{}, func(ctx context.Context, m consume.Message) ([]byte, error) {
		once.Do(func() { close(started) })
		// Blocked until the test ends (its cleanup cancels ctx): the
		// process is dead, and this handler never gets to its effect.
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}, nil)
	ids := e.publish(t, name, 0, 1)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the first worker's handler did not start")
	}
	victim.kill()
	return ids
}

// lostAck drops the first Ack of a delivery, as a worker that crashed after
// recording the result and before acknowledging would.
type lostAck struct {
	jetstream.Msg
	lost *sync.Map
}

func (m lostAck) Ack() error {
	if _, loaded := m.lost.LoadOrStore(keyOf(m.Msg), true); !loaded {
		return errors.New("crashed before the ack left")
	}
	return m.Msg.Ack()
}

// TestCrashAfterCompleteBeforeAck loses the Ack of every fifth message after
// its result is recorded: JetStream redelivers it after AckWait, the helper
// finds the key completed and acknowledges it without running the handler.
func TestCrashAfterCompleteBeforeAck(t *testing.T) {
	e := newEnv(t)
	const name, n = "LOSTACK", 50
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: time.Second})
	fx := newEffects(n)
	var lost sync.Map
	var mu sync.Mutex
	redelivered := map[string]bool{}
	wrap := func(m jetstream.Msg) jetstream.Msg {
		var i int
		if _, err := fmtSscan(keyOf(m), &i); err != nil || i%5 != 0 {
			return m
		}
		if deliveries(m) > 1 {
			mu.Lock()
			redelivered[keyOf(m)] = true
			mu.Unlock()
		}
		return lostAck{Msg: m, lost: &lost}
	}
	for range 3 {
		e.startWorker(t, name, consume.Config{}, effectHandler(fx), wrap)
	}
	ids := e.publish(t, name, 0, n)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	mu.Lock()
	defer mu.Unlock()
	if len(redelivered) != n/5 {
		t.Errorf("%d messages redelivered after a lost ack, want %d", len(redelivered), n/5)
	}
}
