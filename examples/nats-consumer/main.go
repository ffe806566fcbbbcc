// Command nats-consumer ships each order published on a JetStream stream
// once, however often JetStream delivers it: it runs three subscribers of one
// durable consumer through contrib/idemnats, which claims each message's
// Nats-Msg-Id in idemnode before shipping and acknowledges the message only
// after the result is recorded.
//
//	nats-consumer --nats nats://127.0.0.1:4222 --cluster 127.0.0.1:7400,127.0.0.1:7410,127.0.0.1:7420
//	nats pub orders.new '{"order":"o-1"}' -H Nats-Msg-Id:o-1
//
// It makes the stream ORDERS (subjects orders.>) and the durable consumer
// ship if they are missing, and stops on SIGINT or SIGTERM after the messages
// in flight are done.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nats-consumer:", err)
		os.Exit(1)
	}
}

// run consumes until ctx ends, writing one line per order shipped to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("nats-consumer", flag.ContinueOnError)
	natsURL := fs.String("nats", nats.DefaultURL, "NATS server URL")
	cluster := fs.String("cluster", "127.0.0.1:7400", "idemnode gRPC addresses, comma-separated")
	subscribers := fs.Int("subscribers", 3, "competing subscribers of the durable consumer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, err := nats.Connect(*natsURL)
	if err != nil {
		return fmt.Errorf("connect to nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		return fmt.Errorf("stream ORDERS: %w", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{
		Durable:    "ship",
		AckPolicy:  jetstream.AckExplicitPolicy, // the helper requires it
		AckWait:    30 * time.Second,
		MaxDeliver: 5, // then JetStream's MAX_DELIVERIES advisory
	})
	if err != nil {
		return fmt.Errorf("consumer ship: %w", err)
	}
	idem, err := client.New(client.Config{Addrs: strings.Split(*cluster, ",")})
	if err != nil {
		return err
	}
	defer idem.Close()

	ship := func(ctx context.Context, m consume.Message) ([]byte, error) {
		// The side effect: here a line on out; in a real service, a call
		// to the carrier with the key as its own idempotency key.
		fmt.Fprintf(out, "shipped %s: %s\n", m.Header(nats.MsgIdHdr), m.Data())
		return []byte("shipped"), nil
	}
	cfg := consume.Config{Client: idem, TTL: 7 * 24 * time.Hour, Logger: slog.Default()}
	// The messages in flight finish after ctx ends: stopping takes the
	// subscriptions away first, then waits for them.
	work := context.WithoutCancel(ctx)
	var handlers []*idemnats.Handler
	var subs []jetstream.ConsumeContext
	for range *subscribers {
		hd, err := idemnats.NewHandler(work, cons, cfg, ship)
		if err != nil {
			return err
		}
		// A small pull batch: fetched messages the handler has not taken
		// yet get no InProgress, and the client's default batch is 500.
		cc, err := cons.Consume(hd.Handle, jetstream.PullMaxMessages(4))
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		handlers, subs = append(handlers, hd), append(subs, cc)
	}
	slog.Info("consuming ORDERS as ship", "subscribers", *subscribers)
	<-ctx.Done()
	for i, cc := range subs {
		cc.Stop()
		handlers[i].Drain()
	}
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
