package idemnats_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testmain"
	"github.com/idemnode/idemnode/internal/testutil"
)

// env is a real JetStream server and a three-node idemnode cluster in this
// process, the NATS server on host 1 of the cluster's loopback block.
type env struct {
	cluster *testcluster.Cluster
	nats    *natsserver.Server
}

// shared is the env of every test but those that harm their cluster: each
// test uses streams and keys of its own names in it.
var shared *env

func TestMain(m *testing.M) {
	tb := testmain.New("idemnats")
	shared = newOwnEnv(tb)
	code := m.Run()
	tb.Close()
	os.Exit(code)
}

// newEnv returns the shared env.
func newEnv(testing.TB) *env { return shared }

// newOwnEnv starts an env for t alone, for a test that crashes a node.
func newOwnEnv(t testing.TB) *env {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{})
	return &env{cluster: c, nats: startNATS(t, c.Addrs.IP(1))}
}

// startNATS runs nats-server with JetStream on host, on a port it picks,
// storing its streams under the test's temp dir.
func startNATS(t testing.TB, host string) *natsserver.Server {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{
		Host: host, Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready within 10s")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// connect opens a NATS connection of its own (a consumer process has one).
func (e *env) connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(e.nats.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// newClient is an idemnode client of the cluster (a consumer process has one).
func (e *env) newClient(t testing.TB, tune ...func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{Lease: 2 * time.Second}
	for _, nd := range e.cluster.Nodes {
		cfg.Addrs = append(cfg.Addrs, nd.GRPCAddr())
	}
	for _, f := range tune {
		f(&cfg)
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatalf("idemnode client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// consumer makes the stream name (subjects name.>) and its durable consumer
// name, with explicit acks, MaxDeliver 20 unless cc sets one (NewHandler
// refuses an unlimited one) and cc's other settings.
func (e *env) consumer(t testing.TB, name string, cc jetstream.ConsumerConfig) {
	t.Helper()
	_, js := e.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	cc.Durable, cc.AckPolicy = name, jetstream.AckExplicitPolicy
	if cc.MaxDeliver == 0 {
		cc.MaxDeliver = 20
	}
	if _, err := js.CreateConsumer(ctx, name, cc); err != nil {
		t.Fatalf("create consumer: %v", err)
	}
}

// publish sends n messages on name.work, each with Nats-Msg-Id m-<i> and a
// JSON payload, and returns the ids.
func (e *env) publish(t testing.TB, name string, from, n int) []string {
	t.Helper()
	_, js := e.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("m-%d", i)
		if _, err := js.Publish(ctx, name+".work", fmt.Appendf(nil, `{"n":%d}`, i), jetstream.WithMsgID(id)); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// worker is one consumer process: its own NATS connection, idemnode client
// and subscription to the durable consumer.
type worker struct {
	nc *nats.Conn
	cl *client.Client
	cc jetstream.ConsumeContext
}

// startWorker subscribes a new worker to consumer name. wrap, if given,
// sees every delivery before the helper does, and may stand in for it.
func (e *env) startWorker(t testing.TB, name string, cfg consume.Config, h consume.Handler, wrap func(jetstream.Msg) jetstream.Msg) *worker {
	t.Helper()
	nc, js := e.connect(t)
	w := &worker{nc: nc, cl: cfg.Client}
	if w.cl == nil {
		w.cl = e.newClient(t)
		cfg.Client = w.cl
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 200 * time.Millisecond
	}
	if cfg.FailureDelay == 0 {
		cfg.FailureDelay = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cons, err := js.Consumer(ctx, name, name)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	hd, err := idemnats.NewHandler(ctx, cons, cfg, h)
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	handle := hd.Handle
	if wrap != nil {
		inner := handle
		handle = func(m jetstream.Msg) { inner(wrap(m)) }
	}
	// A small batch: a worker that stops does not strand many fetched
	// messages, and JetStream spreads the messages over every worker.
	w.cc, err = cons.Consume(handle, jetstream.PullMaxMessages(4))
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	t.Cleanup(func() { w.cc.Stop(); cancel(); hd.Drain() })
	return w
}

// kill ends the worker as a crash would: its subscription and connection
// are gone and its claims are no longer extended.
func (w *worker) kill() {
	w.cc.Stop()
	w.nc.Close()
	w.cl.Close()
}

// effects counts the side effects per key; a duplicate shows as a count of 2.
type effects struct {
	mu    sync.Mutex
	count map[string]int
	// all is closed once every key of want had its effect.
	want    int
	all     chan struct{}
	allOnce sync.Once
}

func newEffects(want int) *effects {
	return &effects{count: map[string]int{}, want: want, all: make(chan struct{})}
}

// apply is the side effect of the message with key.
func (f *effects) apply(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count[key]++
	if len(f.count) == f.want && f.count[key] == 1 {
		f.allOnce.Do(func() { close(f.all) })
	}
}

// await waits until every key had its effect.
func (f *effects) await(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-f.all:
	case <-time.After(timeout):
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("%d of %d keys had their effect within %s", len(f.count), f.want, timeout)
	}
}

// exactlyOnce fails t unless every id had exactly one effect, and no other
// key had any.
func (f *effects) exactlyOnce(t testing.TB, ids []string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if n := f.count[id]; n != 1 {
			t.Errorf("message %s: effect happened %d times, want 1", id, n)
		}
	}
	if len(f.count) != len(ids) {
		t.Errorf("%d keys had effects, want %d", len(f.count), len(ids))
	}
}

// settled waits until consumer name has no message left to deliver or
// acknowledge: every message was acknowledged or ended.
func (e *env) settled(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	_, js := e.connect(t)
	testutil.Eventually(t, timeout, "consumer "+name+" settled", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cons, err := js.Consumer(ctx, name, name)
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
			return fmt.Errorf("pending %d, awaiting ack %d, redelivered %d", info.NumPending, info.NumAckPending, info.NumRedelivered)
		}
		return nil
	})
}

// keyOf is the Nats-Msg-Id of a delivery.
func keyOf(m jetstream.Msg) string { return m.Headers().Get(nats.MsgIdHdr) }

// deliveries of a delivery, as JetStream counts them.
func deliveries(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.NumDelivered
}

// fmtSscan reads the number of an id m-<n>.
func fmtSscan(id string, n *int) (int, error) { return fmt.Sscanf(id, "m-%d", n) }
