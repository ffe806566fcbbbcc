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
	// Without heartbeats, HoldFor must stay below AckWait (NewHandler).
	cfg := consume.Config{Heartbeat: -1, HoldFor: 500 * time.Millisecond}
	e.startWorker(t, name, cfg, slow, seen.wrap)
	ids := e.publish(t, name, 0, 1)
	e.startWorker(t, name, cfg, slow, seen.wrap)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if n := seen.of(ids[0]); n < 2 {
		t.Errorf("the slow message was delivered %d times, want a redelivery while it ran", n)
	}
}

// TestHeartbeatHoldsSlowMessage runs a handler for two and a half AckWaits
// with an InProgress every eighth of AckWait (wide margins: the machine may
// be loaded): JetStream does not redeliver it.
func TestHeartbeatHoldsSlowMessage(t *testing.T) {
	const name = "HEARTBEAT"
	e := newEnv(t)
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 2 * time.Second})
	fx, seen := newEffects(1), newMaxDeliveries()
	slow := func(ctx context.Context, m consume.Message) ([]byte, error) {
		time.Sleep(5 * time.Second) // the simulated work: 2.5 AckWaits long
		fx.apply(m.Header(nats.MsgIdHdr))
		return []byte("done"), nil
	}
	for range 2 {
		e.startWorker(t, name, consume.Config{Heartbeat: 250 * time.Millisecond}, slow, seen.wrap)
	}
	ids := e.publish(t, name, 0, 1)
	fx.await(t, 30*time.Second)
	e.settled(t, name, 30*time.Second)
	fx.exactlyOnce(t, ids)
	if n := seen.of(ids[0]); n != 1 {
		t.Errorf("the slow message was delivered %d times, want once (InProgress every eighth of AckWait)", n)
	}
}

// recorded returns the result recorded for key under consumer name's
// default scope, failing t when the key is not completed.
func recorded(t *testing.T, cl *client.Client, name, key string) string {
	t.Helper()
	rec, err := cl.Get(context.Background(), client.ID{Scope: "jetstream/" + name + "/" + name, Key: key})
	if err != nil || rec.Response == nil {
		t.Fatalf("record of %s = %+v, %v; want it completed", key, rec, err)
	}
	return string(rec.Response.Body)
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
	if body := recorded(t, w.cl, name, ids[0]); body != "card declined" {
		t.Errorf("recorded %q, want the error's text", body)
	}
}

// TestMessageWithoutKeyTerminates ends a message that has no Nats-Msg-Id
// without running the handler or storing anything.
func TestMessageWithoutKeyTerminates(t *testing.T) {
	terminatedUnrun(t, "NOKEY", "", "Nats-Msg-Id")
}

// publishWith publishes {} on name.work with header set to value (none
// when value is empty).
func (e *env) publishWith(t *testing.T, name, header, value string) {
	t.Helper()
	_, js := e.connect(t)
	msg := nats.NewMsg(name + ".work")
	if value != "" {
		msg.Header.Set(header, value)
	}
	msg.Data = []byte(`{}`)
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// terminatedUnrun publishes one message with Nats-Msg-Id msgID (none when
// empty) to a new consumer name, and checks that it is ended (Term) with a
// reason containing want and that the handler never ran.
func terminatedUnrun(t *testing.T, name, msgID, want string) {
	t.Helper()
	e, _, sub, runs := counted(t, name, "MSG_TERMINATED", jetstream.ConsumerConfig{AckWait: 30 * time.Second}, consume.Config{},
		func() ([]byte, error) { return nil, nil })
	e.publishWith(t, name, nats.MsgIdHdr, msgID)
	adv := nextAdvisory(t, sub)
	if reason, _ := adv["reason"].(string); !strings.Contains(reason, want) {
		t.Errorf("advisory %v, want the reason to say %q", adv, want)
	}
	e.settled(t, name, 30*time.Second)
	if n := runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times for a message it must not run", n)
	}
}

// TestUnavailableIdemnodeHoldsThenNaks points the helper at an address
// where no node listens: the handler never runs, and the message is kept
// (InProgress) for HoldFor, past AckWait, without a redelivery; only then is
// it handed back and delivered again.
func TestUnavailableIdemnodeHoldsThenNaks(t *testing.T) {
	e := newEnv(t)
	const name = "UNAVAILABLE"
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 2 * time.Second})
	dead := e.newClient(t, func(c *client.Config) {
		c.Addrs = []string{e.cluster.Addrs.Addr(2, 17400)} // host 2: nothing listens there
		c.Timeout = 300 * time.Millisecond
	})
	var runs atomic.Int32
	seen := newMaxDeliveries()
	const holdFor = 5 * time.Second
	e.startWorker(t, name, consume.Config{Client: dead, HoldFor: holdFor, Heartbeat: 250 * time.Millisecond}, func(ctx context.Context, m consume.Message) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	}, seen.wrap)
	start := time.Now()
	e.publish(t, name, 0, 1)
	select {
	case <-seen.second:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered again after idemnode could not be reached")
	}
	// A lower bound only: load makes it later, never earlier.
	if held := time.Since(start); held < holdFor-time.Second {
		t.Errorf("delivered again after %s, want the message held about HoldFor (%s) first", held, holdFor)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times without a claim", n)
	}
}

// TestHandlerRefusesUnsafeConsumers refuses a consumer that does not
// acknowledge explicitly (messages would be gone before their results are
// recorded), one without a delivery limit (a failing message would loop
// forever), and heartbeats that cannot hold a message within AckWait.
func TestHandlerRefusesUnsafeConsumers(t *testing.T) {
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
	cl, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	explicit := jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second, MaxDeliver: 5}
	for _, tc := range []struct {
		name string
		cc   jetstream.ConsumerConfig
		cfg  consume.Config
		want string
	}{
		{"auto ack", jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy}, consume.Config{}, "AckExplicitPolicy"},
		{"unlimited deliveries", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1}, consume.Config{}, "MaxDeliver"},
		{"heartbeat not below AckWait", explicit, consume.Config{Heartbeat: 3 * time.Second}, "Heartbeat"},
		{"no heartbeat, long hold", explicit, consume.Config{Heartbeat: -1}, "HoldFor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cc.Durable = strings.ReplaceAll(tc.name, " ", "_")
			cons, err := js.CreateConsumer(ctx, "S", tc.cc)
			if err != nil {
				t.Fatal(err)
			}
			tc.cfg.Client = cl
			_, err = idemnats.NewHandler(ctx, cons, tc.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewHandler: %v, want a refusal naming %s", err, tc.want)
			}
		})
	}
	ok, err := js.CreateConsumer(ctx, "S", explicit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idemnats.NewHandler(ctx, ok, consume.Config{Client: cl}, nil); err != nil {
		t.Errorf("NewHandler on a consumer with explicit acks, MaxDeliver and AckWait: %v", err)
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
