package idemnats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// TestHandlerPanicHandsMessageBack: a handler that panics has its key
// released and its message handed back (Nak) before the panic goes on, so
// the message comes again at once rather than after AckWait (30s here).
func TestHandlerPanicHandsMessageBack(t *testing.T) {
	e := newEnv(t)
	const name = "PANICS"
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	ids := e.publish(t, name, 0, 1)
	_, js := e.connect(t)
	ctx := context.Background()
	cons, err := js.Consumer(ctx, name, name)
	if err != nil {
		t.Fatal(err)
	}
	cl := e.newClient(t)
	scope := "jetstream/" + name + "/" + name
	p, err := consume.New(consume.Config{Client: cl, Scope: scope, Key: idemnats.MsgID(), FailureDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	next := func() jetstream.Msg {
		t.Helper()
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			return m
		}
		t.Fatalf("no message within 10s (AckWait is 30s: a redelivery this soon is the Nak's): %v", batch.Error())
		return nil
	}
	recovered := func() (v any) {
		defer func() { v = recover() }()
		_, _ = p.Process(ctx, idemnats.NewMessage(next()), func(context.Context, consume.Message) ([]byte, error) {
			panic("handler bug")
		})
		return nil
	}()
	if recovered != "handler bug" {
		t.Fatalf("Process recovered %v, want the handler's panic to propagate", recovered)
	}
	if _, err := cl.Get(ctx, client.ID{Scope: scope, Key: ids[0]}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("key after the panic: %v, want it released (ErrNotFound)", err)
	}
	if m := next(); deliveries(m) != 2 {
		t.Errorf("redelivery numbered %d, want 2", deliveries(m))
	} else if err := m.Ack(); err != nil {
		t.Fatal(err)
	}
}
