package idemnats_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// TestHeldKeySpendsNoDeliveries kills a holder mid-handler on a consumer
// with MaxDeliver 3 and a one-second AckWait: the survivor waits for the
// dead holder's two-second lease to lapse while holding the message
// (InProgress), rather than handing it back once per delivery, so the
// message is not dropped (MAX_DELIVERIES) before its effect happens once.
func TestHeldKeySpendsNoDeliveries(t *testing.T) {
	e := newEnv(t)
	const name = "HELDMAX"
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: time.Second, MaxDeliver: 3})
	sub := e.advisories(t, "MAX_DELIVERIES", name)
	fx := newEffects(1)
	ids := e.killMidMessage(t, name)
	e.startWorker(t, name, consume.Config{}, effectHandler(fx), nil)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if msg, err := sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("MAX_DELIVERIES advisory for a message whose handler never failed: %s", msg.Data)
	}
}

// TestLargeResultRecordedAsDigest returns a result larger than idemnode
// stores: it is recorded as its digest, so the handler runs once and the
// message is acknowledged, instead of running again on every delivery.
func TestLargeResultRecordedAsDigest(t *testing.T) {
	const name = "BIGRESULT"
	e, w, _, runs := counted(t, name, "MAX_DELIVERIES", jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxDeliver: 4}, consume.Config{},
		func() ([]byte, error) { return bytes.Repeat([]byte("x"), 1<<20+1), nil })
	ids := e.publish(t, name, 0, 1)
	e.settled(t, name, 30*time.Second)
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if body := recorded(t, w.cl, name, ids[0]); !strings.HasPrefix(body, "sha256:") || !strings.HasSuffix(body, " 1048577 bytes") {
		t.Errorf("recorded %q, want the result's digest and length", body)
	}
}

// TestInvalidKeyTerminates publishes a message whose Nats-Msg-Id idemnode
// refuses (not ASCII): it is ended with a reason that says so, unrun,
// instead of being handed back on every delivery.
func TestInvalidKeyTerminates(t *testing.T) {
	terminatedUnrun(t, "BADKEY", "évt-1", "printable ASCII")
}

// TestHashedKeyAcceptsAnyEventID takes a non-ASCII event id through
// consume.Hashed: the message runs once and a redelivery of it is a
// duplicate.
func TestHashedKeyAcceptsAnyEventID(t *testing.T) {
	const name = "HASHEDKEY"
	var runs atomic.Int32
	e := newEnv(t)
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	e.startWorker(t, name, consume.Config{Key: consume.Hashed("orders", consume.FromHeader("event-id"))}, func(context.Context, consume.Message) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	}, nil)
	for range 2 {
		e.publishWith(t, name, "event-id", "évt-"+strings.Repeat("9", 300))
	}
	e.settled(t, name, 30*time.Second)
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times for two messages of one event id, want 1", n)
	}
}

// TestDrainHandsBackHeldMessage: a message waiting for a key another holder
// keeps (HoldFor a minute here) is handed back as soon as its subscription
// is drained, so stopping a consumer does not wait out HoldFor.
func TestDrainHandsBackHeldMessage(t *testing.T) {
	e := newEnv(t)
	const name = "DRAINHELD"
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	holder := e.newClient(t)
	claim, err := holder.Claim(context.Background(), client.ID{Scope: "jetstream/" + name + "/" + name, Key: "m-0"},
		client.Fingerprint([]byte(`{"n":0}`)), client.WithLease(time.Minute))
	if err != nil || claim.Outcome != client.OutcomeWon {
		t.Fatalf("claim: %+v, %v", claim, err)
	}
	var naked atomic.Bool
	delivered := make(chan struct{}, 1)
	_, js := e.connect(t)
	cons, err := js.Consumer(context.Background(), name, name)
	if err != nil {
		t.Fatal(err)
	}
	hd, err := idemnats.NewHandler(context.Background(), cons, consume.Config{Client: e.newClient(t), HoldFor: time.Minute}, func(context.Context, consume.Message) ([]byte, error) {
		t.Error("the handler ran while another holder had the key")
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		hd.Handle(nakSeen{m, &naked})
		delivered <- struct{}{}
	}, jetstream.PullMaxMessages(1))
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, name, 0, 1)
	select {
	case <-delivered:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered")
	}
	cc.Stop()
	drained := make(chan struct{})
	go func() { hd.Drain(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(20 * time.Second):
		t.Fatal("Drain waited on a held message (HoldFor is a minute)")
	}
	if !naked.Load() {
		t.Error("Drain returned without handing the held message back (Nak)")
	}
}

// nakSeen notes a Nak of the delivery.
type nakSeen struct {
	jetstream.Msg
	naked *atomic.Bool
}

func (m nakSeen) NakWithDelay(d time.Duration) error {
	m.naked.Store(true)
	return m.Msg.NakWithDelay(d)
}
