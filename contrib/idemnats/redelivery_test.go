package idemnats_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// maxDeliveries records the most deliveries seen of each key.
type maxDeliveries struct {
	mu sync.Mutex
	n  map[string]uint64
	// second is closed at the first delivery numbered 2 or more.
	second chan struct{}
	once   sync.Once
}

func newMaxDeliveries() *maxDeliveries {
	return &maxDeliveries{n: map[string]uint64{}, second: make(chan struct{})}
}

func (d *maxDeliveries) wrap(m jetstream.Msg) jetstream.Msg {
	n := deliveries(m)
	d.mu.Lock()
	d.n[keyOf(m)] = max(d.n[keyOf(m)], n)
	d.mu.Unlock()
	if n >= 2 {
		d.once.Do(func() { close(d.second) })
	}
	return m
}

func (d *maxDeliveries) of(key string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[key]
}

// oneSlowMessage prepares a consumer with a one-second AckWait, the effects
// of one message and a record of its deliveries.
func oneSlowMessage(t *testing.T, name string) (*env, *effects, *maxDeliveries) {
	e := newEnv(t)
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: time.Second})
	return e, newEffects(1), newMaxDeliveries()
}

// TestAckWaitExpiresWithoutHeartbeat runs a handler past AckWait with the
// heartbeat off: JetStream redelivers the message to the other worker while
// the first still runs it; the redelivery finds the key in progress and goes
// back (Nak with delay), and the one after the first worker's completion is
// acknowledged unrun. The effect happens once.
func TestAckWaitExpiresWithoutHeartbeat(t *testing.T) {
	const name = "ACKWAIT"
	e, fx, seen := oneSlowMessage(t, name)
	slow := func(ctx context.Context, m consume.Message) ([]byte, error) {
		// Slower than AckWait: it returns only once JetStream gave up on
		// this delivery and handed the message out again.
		select {
		case <-seen.second:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		fx.apply(m.Header(nats.MsgIdHdr))
		return []byte("done"), nil
	}
	e.startWorker(t, name, consume.Config{Heartbeat: -1}, slow, seen.wrap)
	ids := e.publish(t, name, 0, 1)
	e.startWorker(t, name, consume.Config{Heartbeat: -1}, slow, seen.wrap)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if n := seen.of(ids[0]); n < 2 {
		t.Errorf("the slow message was delivered %d times, want a redelivery while it ran", n)
	}
}

// TestHeartbeatHoldsSlowMessage runs a handler for three AckWaits with the
// default heartbeat (a third of AckWait): JetStream does not redeliver it.
func TestHeartbeatHoldsSlowMessage(t *testing.T) {
	const name = "HEARTBEAT"
	e, fx, seen := oneSlowMessage(t, name)
	slow := func(ctx context.Context, m consume.Message) ([]byte, error) {
		time.Sleep(3 * time.Second) // the simulated work: three AckWaits long
		fx.apply(m.Header(nats.MsgIdHdr))
		return []byte("done"), nil
	}
	for range 2 {
		e.startWorker(t, name, consume.Config{}, slow, seen.wrap)
	}
	ids := e.publish(t, name, 0, 1)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if n := seen.of(ids[0]); n != 1 {
		t.Errorf("the slow message was delivered %d times, want once (InProgress every third of AckWait)", n)
	}
}

// advisories subscribes to JetStream's advisories of kind for consumer name.
func (e *env) advisories(t *testing.T, kind, name string) *nats.Subscription {
	t.Helper()
	nc, _ := e.connect(t)
	sub, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER." + kind + "." + name + "." + name)
	if err != nil {
		t.Fatalf("subscribe to advisories: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return sub
}

// nextAdvisory returns the next advisory's JSON fields.
func nextAdvisory(t *testing.T, sub *nats.Subscription) map[string]any {
	t.Helper()
	msg, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("advisory on %s: %v", sub.Subject, err)
	}
	var adv map[string]any
	if err := json.Unmarshal(msg.Data, &adv); err != nil {
		t.Fatalf("advisory %s: %v", msg.Data, err)
	}
	return adv
}

// counted makes consumer name with cc, subscribes to its advisories of
// kind, and starts one worker whose handler counts its runs and answers
// with answer.
func counted(t *testing.T, name, kind string, cc jetstream.ConsumerConfig, cfg consume.Config, answer func() ([]byte, error)) (*env, *worker, *nats.Subscription, *atomic.Int32) {
	t.Helper()
	e := newEnv(t)
	e.consumer(t, name, cc)
	sub := e.advisories(t, kind, name)
	runs := new(atomic.Int32)
	w := e.startWorker(t, name, cfg, func(ctx context.Context, m consume.Message) ([]byte, error) {
		runs.Add(1)
		return answer()
	}, nil)
	return e, w, sub, runs
}

// TestFailingMessageFollowsMaxDeliver fails the handler on every delivery:
// the key is released after each, the message is delivered MaxDeliver
// times, and JetStream publishes its MAX_DELIVERIES advisory.
func TestFailingMessageFollowsMaxDeliver(t *testing.T) {
	const name = "FAILING"
	e, w, sub, runs := counted(t, name, "MAX_DELIVERIES", jetstream.ConsumerConfig{AckWait: 5 * time.Second, MaxDeliver: 3}, consume.Config{},
		func() ([]byte, error) { return nil, errors.New("downstream unavailable") })
	ids := e.publish(t, name, 0, 1)
	adv := nextAdvisory(t, sub)
	if adv["deliveries"] != float64(3) {
		t.Errorf("advisory %v, want deliveries 3", adv)
	}
	if n := runs.Load(); n != 3 {
		t.Errorf("the handler ran %d times, want 3 (MaxDeliver)", n)
	}
	_, err := w.cl.Get(context.Background(), client.ID{Scope: "jetstream/" + name + "/" + name, Key: ids[0]})
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("key after the last failure: %v, want it released (ErrNotFound)", err)
	}
}

// TestPermanentFailureTerminates records a failure marked client.Permanent
// and ends the message: no redelivery, a MSG_TERMINATED advisory, the key
// completed with the error's text.
func TestPermanentFailureTerminates(t *testing.T) {
	const name = "PERMANENT"
	e, w, sub, runs := counted(t, name, "MSG_TERMINATED", jetstream.ConsumerConfig{AckWait: 5 * time.Second}, consume.Config{},
		func() ([]byte, error) { return nil, client.Permanent(errors.New("card declined")) })
	ids := e.publish(t, name, 0, 1)
	adv := nextAdvisory(t, sub)
	if reason, _ := adv["reason"].(string); !strings.Contains(reason, "card declined") {
		t.Errorf("advisory %v, want the reason to say why", adv)
	}
	e.settled(t, name, 30*time.Second)
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	rec, err := w.cl.Get(context.Background(), client.ID{Scope: "jetstream/" + name + "/" + name, Key: ids[0]})
	if err != nil || rec.Response == nil || string(rec.Response.Body) != "card declined" {
		t.Errorf("record = %+v, %v; want completed with the error's text", rec, err)
	}
}

// TestMessageWithoutKeyTerminates ends a message that has no Nats-Msg-Id
// without running the handler or storing anything.
func TestMessageWithoutKeyTerminates(t *testing.T) {
	const name = "NOKEY"
	e, _, sub, runs := counted(t, name, "MSG_TERMINATED", jetstream.ConsumerConfig{AckWait: 5 * time.Second}, consume.Config{},
		func() ([]byte, error) { return nil, nil })
	_, js := e.connect(t)
	if _, err := js.Publish(context.Background(), name+".work", []byte(`{}`)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	adv := nextAdvisory(t, sub)
	if reason, _ := adv["reason"].(string); !strings.Contains(reason, "Nats-Msg-Id") {
		t.Errorf("advisory %v, want the reason to name the missing header", adv)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times for a message without a key", n)
	}
}

// TestUnavailableIdemnodeNaks points the helper at an address where no node
// listens: the handler never runs, and the message is handed back and
// delivered again instead of being acknowledged.
func TestUnavailableIdemnodeNaks(t *testing.T) {
	e := newEnv(t)
	const name = "UNAVAILABLE"
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	dead := e.newClient(t, func(c *client.Config) {
		c.Addrs = []string{e.cluster.Addrs.Addr(2, 17400)} // host 2: nothing listens there
		c.Timeout = 300 * time.Millisecond
	})
	var runs atomic.Int32
	seen := newMaxDeliveries()
	e.startWorker(t, name, consume.Config{Client: dead}, func(ctx context.Context, m consume.Message) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	}, seen.wrap)
	e.publish(t, name, 0, 1)
	// AckWait is 30s: a delivery within the test's time is the Nak's.
	select {
	case <-seen.second:
	case <-time.After(20 * time.Second):
		t.Fatal("the message was not delivered again after idemnode could not be reached")
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times without a claim", n)
	}
}

// TestHandlerRefusesAutoAck refuses a consumer that does not acknowledge
// explicitly: its messages would be gone before their results are recorded.
func TestHandlerRefusesAutoAck(t *testing.T) {
	s := startNATS(t, "127.0.0.1")
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = idemnats.NewHandler(ctx, cons, consume.Config{Client: cl}, nil)
	if err == nil || !strings.Contains(err.Error(), "AckExplicitPolicy") {
		t.Errorf("Handler on an AckNone consumer: %v, want a refusal naming AckExplicitPolicy", err)
	}
}

// TestKeyReusedForAnotherPayloadTerminates takes the key from an event-id
// header and publishes two messages under one id with different payloads:
// the first runs, the second is ended unrun (MISMATCH).
func TestKeyReusedForAnotherPayloadTerminates(t *testing.T) {
	const name = "REUSED"
	e, _, sub, runs := counted(t, name, "MSG_TERMINATED", jetstream.ConsumerConfig{AckWait: 5 * time.Second}, consume.Config{Key: consume.FromHeader("event-id")},
		func() ([]byte, error) { return nil, nil })
	_, js := e.connect(t)
	for _, body := range []string{`{"amount":1}`, `{"amount":2}`} {
		msg := nats.NewMsg(name + ".work")
		msg.Header.Set("event-id", "evt-1")
		msg.Data = []byte(body)
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	adv := nextAdvisory(t, sub)
	if reason, _ := adv["reason"].(string); !strings.Contains(reason, "different request") {
		t.Errorf("advisory %v, want the reason to say the key was reused", adv)
	}
	e.settled(t, name, 30*time.Second)
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}
