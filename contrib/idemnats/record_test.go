package idemnats_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
	"github.com/idemnode/idemnode/internal/testcluster"
)

// signalLog closes fired at the first log record whose message contains
// match.
type signalLog struct {
	match string
	fired chan struct{}
	once  sync.Once
}

func (s *signalLog) Enabled(context.Context, slog.Level) bool { return true }
func (s *signalLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, s.match) {
		s.once.Do(func() { close(s.fired) })
	}
	return nil
}
func (s *signalLog) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *signalLog) WithGroup(string) slog.Handler      { return s }

// TestResultRecordedAfterOutage crashes idemnode (one node) while the
// handler runs, so recording its result fails; the helper keeps the message
// and records the result under the same token once the node is back, past
// the lease, instead of handing the message back to run the handler again.
func TestResultRecordedAfterOutage(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{
		// One node: bootstrap alone (bootstrap-expect needs two or more).
		Tune: func(cfg *cluster.Config) { cfg.Bootstrap, cfg.Join = true, nil }})
	e := &env{cluster: c, nats: shared.nats}
	const name = "OUTAGE"
	e.consumer(t, name, jetstream.ConsumerConfig{AckWait: 5 * time.Second})
	cl := e.newClient(t, func(cfg *client.Config) {
		cfg.Timeout, cfg.FinishTimeout = time.Second, time.Second
	})
	failed := &signalLog{match: "recording the result failed", fired: make(chan struct{})}
	var runs atomic.Int32
	e.startWorker(t, name, consume.Config{Client: cl, Logger: slog.New(failed)}, func(ctx context.Context, m consume.Message) ([]byte, error) {
		if runs.Add(1) == 1 {
			c.Crash(c.Nodes[0]) // the side effect is done; idemnode goes away
		}
		return []byte("done"), nil
	}, nil)
	ids := e.publish(t, name, 0, 1)
	// Restart once recording has failed (or after a while regardless: the
	// run count below is what the test checks).
	select {
	case <-failed.fired:
	case <-time.After(15 * time.Second):
		t.Error("the helper did not log a failed recording")
	}
	c.Restart(c.Nodes[0])
	e.settled(t, name, 60*time.Second)
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if body := recorded(t, cl, name, ids[0]); body != "done" {
		t.Errorf("recorded %q, want the handler's result", body)
	}
}
