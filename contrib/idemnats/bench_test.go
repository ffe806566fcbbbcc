package idemnats_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// Benchmark parameters: issue 46's target is at 8 consumers with 2 ms of
// simulated work per message.
const (
	benchWork     = 2 * time.Millisecond
	benchMessages = 800
)

// benchConsumers is the number of subscribers, benchDepth the helper's
// Config.Depth (messages one subscriber holds claimed at once);
// IDEMNATS_BENCH_CONSUMERS and IDEMNATS_BENCH_DEPTH override them.
var benchConsumers, benchDepth = 8, 4

func init() {
	if v, err := strconv.Atoi(os.Getenv("IDEMNATS_BENCH_CONSUMERS")); err == nil {
		benchConsumers = v
	}
	if v, err := strconv.Atoi(os.Getenv("IDEMNATS_BENCH_DEPTH")); err == nil {
		benchDepth = v
	}
}

// countedAck counts a message as handled once its Ack is sent.
type countedAck struct {
	jetstream.Msg
	count func()
}

func (m countedAck) Ack() error {
	err := m.Msg.Ack()
	m.count()
	return err
}

// streams numbers the benchmark's streams.
var streams atomic.Int64

// BenchmarkRateAgainstBare measures, in one run, the rate of 8 competing
// subscribers of a durable JetStream consumer doing 2 ms of work per message
// and acknowledging it, bare and through idemnats (claim, work, complete,
// acknowledge), and reports both rates and their ratio. Each iteration runs
// both on fresh streams of benchMessages messages each, in turns of who goes
// first; the messages are published before the clock starts.
func BenchmarkRateAgainstBare(b *testing.B) {
	e := newEnv(b)
	cl := e.newClient(b, func(c *client.Config) { c.Lease = 30 * time.Second })
	var bare, helped time.Duration
	for i := range b.N {
		n := streams.Add(1) // the env is shared by every run: fresh names each time
		bareName, helpedName := fmt.Sprintf("BARE%d", n), fmt.Sprintf("HELPED%d", n)
		runs := []func(){
			func() { bare += e.rate(b, bareName, nil) },
			func() { helped += e.rate(b, helpedName, cl) },
		}
		if i%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, run := range runs {
			run()
		}
	}
	n := float64(b.N * benchMessages)
	b.ReportMetric(n/bare.Seconds(), "bare-msgs/s")
	b.ReportMetric(n/helped.Seconds(), "idemnats-msgs/s")
	b.ReportMetric(bare.Seconds()/helped.Seconds(), "ratio")
	b.ReportMetric(float64(benchDepth), "depth")
	b.ReportMetric(float64(benchConsumers), "consumers")
	b.ReportMetric(0, "ns/op")
}

// rate publishes benchMessages messages to a new stream name, then times
// benchConsumers subscribers until every message is handled: bare when cl is
// nil (work, then Ack), else through idemnats with cl.
func (e *env) rate(b *testing.B, name string, cl *client.Client) time.Duration {
	b.Helper()
	e.consumer(b, name, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	e.publish(b, name, 0, benchMessages)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	done := make(chan struct{})
	count := func() {
		if handled.Add(1) == benchMessages {
			close(done)
		}
	}
	var subs []jetstream.ConsumeContext
	start := time.Now()
	for range benchConsumers {
		_, js := e.connect(b)
		cons, err := js.Consumer(ctx, name, name)
		if err != nil {
			b.Fatalf("consumer: %v", err)
		}
		handle := func(m jetstream.Msg) {
			time.Sleep(benchWork)
			if err := m.Ack(); err != nil {
				b.Errorf("ack: %v", err)
			}
		}
		if cl != nil {
			hd, err := idemnats.NewHandler(ctx, cons, consume.Config{Client: cl, Depth: benchDepth}, func(ctx context.Context, m consume.Message) ([]byte, error) {
				time.Sleep(benchWork)
				return nil, nil
			})
			if err != nil {
				b.Fatalf("handler: %v", err)
			}
			handle = hd.Handle
			defer hd.Drain()
		}
		cc, err := cons.Consume(func(m jetstream.Msg) { handle(countedAck{m, count}) }, jetstream.PullMaxMessages(10))
		if err != nil {
			b.Fatalf("consume: %v", err)
		}
		subs = append(subs, cc)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%s: %d of %d messages handled in 5 minutes", name, handled.Load(), benchMessages)
	}
	elapsed := time.Since(start)
	for _, cc := range subs {
		cc.Stop()
	}
	return elapsed
}

// BenchmarkClusterPairs measures what bounds the helper when idemnode's
// capacity, not its latency, is the limit: the rate of claim and complete
// pairs the in-process cluster answers to 32 concurrent callers in this
// process, without NATS.
func BenchmarkClusterPairs(b *testing.B) {
	e := newEnv(b)
	cl := e.newClient(b)
	ctx := context.Background()
	const callers, pairs = 32, 2000
	var elapsed time.Duration
	for range b.N {
		var next atomic.Int64
		errs := make(chan error, callers)
		start := time.Now()
		for range callers {
			go func() {
				for next.Add(1) <= pairs {
					id := client.ID{Scope: "bench/pairs", Key: client.NewKey()}
					c, err := cl.Claim(ctx, id, nil)
					if err == nil {
						_, err = cl.Complete(ctx, id, c.Token, client.Response{Status: 200})
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range callers {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(b.N*pairs)/elapsed.Seconds(), "pairs/s")
	b.ReportMetric(0, "ns/op")
}
