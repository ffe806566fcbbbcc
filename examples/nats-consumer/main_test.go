package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/internal/testutil"
)

// lockedBuffer is the program's output, written by its subscribers and read
// by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShipsEachOrderOnce runs the example as its doc comment does, against a
// real nats-server and a three-node cluster, publishes three orders, and
// finds each shipped once; it stops cleanly when its context ends.
func TestShipsEachOrderOnce(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	var addrs []string
	for _, nd := range c.Nodes {
		addrs = append(addrs, nd.GRPCAddr())
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: c.Addrs.IP(1), Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)

	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats", ns.ClientURL(), "--cluster", strings.Join(addrs, ",")}, &out)
	}()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the stream made", func() error {
		_, err := js.Stream(ctx, "ORDERS")
		return err
	})
	for i := range 3 {
		if _, err := js.Publish(ctx, "orders.new", fmt.Appendf(nil, `{"order":"o-%d"}`, i), jetstream.WithMsgID(fmt.Sprintf("o-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "three orders shipped", func() bool {
		return strings.Count(out.String(), "shipped ") == 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	for i := range 3 {
		if n := strings.Count(out.String(), fmt.Sprintf("shipped o-%d:", i)); n != 1 {
			t.Errorf("order o-%d shipped %d times:\n%s", i, n, out.String())
		}
	}
}
