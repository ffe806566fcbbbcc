package idemnats_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
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
	started := make(chan struct{})
	var once sync.Once
	victim := e.startWorker(t, name, consume.Config{}, func(ctx context.Context, m consume.Message) ([]byte, error) {
		once.Do(func() { close(started) })
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
	rec, err := w.cl.Get(context.Background(), client.ID{Scope: "jetstream/" + name + "/" + name, Key: ids[0]})
	if err != nil || rec.Response == nil || !strings.HasPrefix(string(rec.Response.Body), "sha256:") || !strings.HasSuffix(string(rec.Response.Body), " 1048577 bytes") {
		t.Errorf("record = %+v, %v; want completed with the result's digest and length", rec, err)
	}
}

// TestInvalidKeyTerminates publishes a message whose Nats-Msg-Id idemnode
// refuses (not ASCII): it is ended with a reason that says so, unrun,
// instead of being handed back on every delivery.
func TestInvalidKeyTerminates(t *testing.T) {
	const name = "BADKEY"
	e, _, sub, runs := counted(t, name, "MSG_TERMINATED", jetstream.ConsumerConfig{AckWait: 30 * time.Second}, consume.Config{},
		func() ([]byte, error) { return nil, nil })
	_, js := e.connect(t)
	msg := nats.NewMsg(name + ".work")
	msg.Header.Set(nats.MsgIdHdr, "évt-1")
	msg.Data = []byte(`{}`)
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatalf("publish: %v", err)
	}
	adv := nextAdvisory(t, sub)
	if reason, _ := adv["reason"].(string); !strings.Contains(reason, "printable ASCII") {
		t.Errorf("advisory %v, want the reason to name the key rule", adv)
	}
	e.settled(t, name, 30*time.Second)
	if n := runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times for a key idemnode refuses", n)
	}
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
	_, js := e.connect(t)
	for range 2 {
		msg := nats.NewMsg(name + ".work")
		msg.Header.Set("event-id", "évt-"+strings.Repeat("9", 300))
		msg.Data = []byte(`{}`)
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	e.settled(t, name, 30*time.Second)
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times for two messages of one event id, want 1", n)
	}
}
