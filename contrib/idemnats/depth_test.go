package idemnats_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/contrib/idemnats"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// inFlight counts the messages a lane holds, from the moment the lane takes
// one up (Process asks for its key, once a slot is free) to its Ack, and
// keeps the most seen at once. Counting at the subscription's callback
// instead would count messages still waiting for a slot.
type inFlight struct{ now, most atomic.Int32 }

type trackedAck struct {
	jetstream.Msg
	f *inFlight
}

func (m trackedAck) Ack() error {
	m.f.now.Add(-1)
	return m.Msg.Ack()
}

func (f *inFlight) wrap(m jetstream.Msg) jetstream.Msg { return trackedAck{m, f} }

// key counts a message taken up, then returns its key from inner.
func (f *inFlight) key(inner consume.KeyFunc) consume.KeyFunc {
	return func(m consume.Message) (string, error) {
		n := f.now.Add(1)
		for {
			most := f.most.Load()
			if n <= most || f.most.CompareAndSwap(most, n) {
				return inner(m)
			}
		}
	}
}

// TestDepthOverlapsMessagesNotHandlers gives one subscription Depth 4: it
// holds several messages at once (claimed ahead, recorded behind), while
// never running two handlers at once, and every effect happens once.
func TestDepthOverlapsMessagesNotHandlers(t *testing.T) {
	e := newEnv(t)
	const name, n = "DEPTH", 40
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	fx := newEffects(n)
	var running, mostRunning atomic.Int32
	h := func(ctx context.Context, m consume.Message) ([]byte, error) {
		if r := running.Add(1); r > mostRunning.Load() {
			mostRunning.Store(r)
		}
		defer running.Add(-1)
		time.Sleep(5 * time.Millisecond) // the simulated work
		fx.apply(m.Header(nats.MsgIdHdr))
		return nil, nil
	}
	var flight inFlight
	e.startWorker(t, name, consume.Config{Depth: 4, Key: flight.key(idemnats.MsgID())}, h, flight.wrap)
	ids := e.publish(t, name, 0, n)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if got := mostRunning.Load(); got != 1 {
		t.Errorf("%d handlers of one subscription ran at once, want 1", got)
	}
	if got := flight.most.Load(); got < 2 {
		t.Errorf("at most %d message in flight at once with Depth 4, want more than 1", got)
	}
}
