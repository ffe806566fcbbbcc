package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemnode/idemnode/client"
)

// Config configures a Processor. Client, Scope and Key are required.
type Config struct {
	// Client is the idemnode client the keys are claimed with.
	Client *client.Client
	// Tenant and Scope name the records: client.ID{Tenant, Scope, key}.
	// Give every kind of processing its own scope: two consumers of one
	// stream that do different things must not share keys, or the second
	// would find every message done by the first.
	Tenant string
	Scope  string
	// Key takes the idempotency key from a message.
	Key KeyFunc
	// Fingerprint identifies the message's request; nil is
	// client.Fingerprint of the payload. A key that comes back with another
	// fingerprint is a MISMATCH: the message is ended (Term), unrun.
	Fingerprint func(Message) []byte
	// Lease and TTL of the claims; zero takes the client's defaults. The
	// lease is extended every third of it while the handler runs; the TTL
	// is how long a redelivery is recognised as done, so it must outlast
	// the broker's redelivery and retention window.
	Lease time.Duration
	TTL   time.Duration
	// Heartbeat is how often Message.InProgress is sent while a message is
	// worked on (claim, handler, recording); zero or negative never.
	Heartbeat time.Duration
	// RetryDelay is how long a message waits before its next delivery when
	// its key is held elsewhere, idemnode cannot be reached, or the result
	// could not be recorded (default 1s).
	RetryDelay time.Duration
	// FailureDelay is how long a message waits after the handler failed
	// (default 1s); the broker's own limit (JetStream's MaxDeliver) counts
	// the attempts.
	FailureDelay time.Duration
	// Depth is how many messages a Lane (one subscriber) holds claimed at
	// once; their handlers still run one at a time. Above 1, idemnode's
	// round trips overlap the handler's work (default 1: one message at a
	// time, in delivery order).
	Depth int
	// Logger receives what Process cannot return; nil is slog.Default().
	Logger *slog.Logger
}

// Disposition is what Process did with a message.
type Disposition int

const (
	// Processed: the handler ran here, its result is recorded, the message
	// acknowledged.
	Processed Disposition = iota + 1
	// Duplicate: the key's result was already recorded; the message is
	// acknowledged without running the handler.
	Duplicate
	// Retry: the message was handed back (Nak) for a later delivery.
	Retry
	// Terminated: the message will not be delivered again (no key, a
	// permanent failure, a key reused for another payload, or expired).
	Terminated
)

// String names the disposition.
func (d Disposition) String() string {
	switch d {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case Retry:
		return "retry"
	case Terminated:
		return "terminated"
	}
	return "unknown"
}

// Processor runs handlers under idemnode claims. It is safe for concurrent
// use: one Processor serves every consumer of a process.
type Processor struct {
	cfg  Config
	opts []client.Option
}

// New checks cfg and returns a Processor.
func New(cfg Config) (*Processor, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("consume: Config.Client is required")
	case cfg.Scope == "":
		return nil, errors.New("consume: Config.Scope is required (name the kind of processing)")
	case cfg.Key == nil:
		return nil, errors.New("consume: Config.Key is required (FromHeader, FromJSONField or your own)")
	case cfg.Lease < 0 || cfg.TTL < 0 || cfg.RetryDelay < 0 || cfg.FailureDelay < 0 || cfg.Depth < 0:
		return nil, errors.New("consume: Lease, TTL, RetryDelay, FailureDelay and Depth must not be negative")
	}
	cfg.Depth = max(cfg.Depth, 1)
	if cfg.Fingerprint == nil {
		cfg.Fingerprint = func(m Message) []byte { return client.Fingerprint(m.Data()) }
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.FailureDelay == 0 {
		cfg.FailureDelay = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The claim does not wait for another holder: the broker holds the
	// message instead (Nak with RetryDelay), so a consumer never sits idle
	// on a key held elsewhere.
	opts := []client.Option{client.WithWait(0)}
	if cfg.Lease > 0 {
		opts = append(opts, client.WithLease(cfg.Lease))
	}
	if cfg.TTL > 0 {
		opts = append(opts, client.WithTTL(cfg.TTL))
	}
	return &Processor{cfg: cfg, opts: opts}, nil
}

// Process handles one delivery: it claims the message's key and runs h as its
// holder (client.Do), then acknowledges the message only after the result is
// recorded. It returns what it did, and why when the message was handed back
// or ended; an error of the broker's Ack, Nak or Term is joined to it.
//
//   - The key is new, or its last holder released it or died: h runs. A nil
//     error (or a permanent one) is recorded, then the message is
//     acknowledged (or ended); another error releases the key and hands the
//     message back after FailureDelay.
//   - The key's result is recorded: Ack, h does not run (Duplicate).
//   - Another holder has the key, idemnode cannot be reached, or the result
//     could not be recorded: Nak after RetryDelay, never Ack.
//   - No key, a key reused with another payload, or a key whose record
//     expired: Term, h does not run.
//
// Panics of h propagate after the key is released, as in client.Do.
func (p *Processor) Process(ctx context.Context, m Message, h Handler) (Disposition, error) {
	key, err := p.cfg.Key(m)
	if err != nil {
		return p.term(m, fmt.Errorf("consume: %w", err))
	}
	id := client.ID{Tenant: p.cfg.Tenant, Scope: p.cfg.Scope, Key: key}
	stop := p.heartbeat(m)
	var fnErr error
	res, err := p.cfg.Client.Do(ctx, id, p.cfg.Fingerprint(m), func(ctx context.Context) (client.Response, error) {
		var body []byte
		body, fnErr = h(ctx, m)
		status := 200
		if fnErr != nil {
			status = 500
			if len(body) == 0 {
				body = []byte(fnErr.Error())
			}
		}
		return client.Response{Status: status, Body: body}, fnErr
	}, p.opts...)
	stop()
	switch {
	case err == nil && res.Replayed:
		return p.settle(Duplicate, nil, m.Ack())
	case res.Executed && err == fnErr && res.Action == client.Complete && fnErr == nil:
		return p.settle(Processed, nil, m.Ack())
	case res.Executed && err == fnErr && res.Action == client.Complete:
		return p.term(m, fmt.Errorf("consume %s: permanent failure recorded: %w", id, fnErr))
	case res.Executed && err == fnErr:
		// Released: the next delivery runs h again. The broker's own limit
		// ends a message that keeps failing, with its own advisory.
		return p.settle(Retry, fmt.Errorf("consume %s: handler failed, key released: %w", id, fnErr), m.Nak(p.cfg.FailureDelay))
	case res.Executed:
		// h ran but its result is not recorded (idemnode unreachable past
		// the client's FinishTimeout, or the lease was lost). Never Ack: the
		// redelivery finds the record completed by whoever holds it, or, if
		// the record stays PENDING until its lease ends, runs h again.
		p.cfg.Logger.Error("consume: the handler ran but its result is not recorded; the message goes back to the broker", "id", id.String(), "err", err)
		return p.settle(Retry, fmt.Errorf("consume %s: %w", id, err), m.Nak(p.cfg.RetryDelay))
	case errors.Is(err, client.ErrMismatch), errors.Is(err, client.ErrExpired):
		return p.term(m, fmt.Errorf("consume %s: %w", id, err))
	}
	// Held elsewhere (ErrInProgress), idemnode unavailable, rate-limited,
	// or ctx ended before the claim was answered.
	delay := p.cfg.RetryDelay
	if d, ok := client.RetryAfter(err); ok && d > delay {
		delay = d
	}
	return p.settle(Retry, fmt.Errorf("consume %s: %w", id, err), m.Nak(delay))
}

// term ends m for the reason err and reports it.
func (p *Processor) term(m Message, err error) (Disposition, error) {
	p.cfg.Logger.Warn("consume: message ended (Term) without running the handler again", "err", err)
	return p.settle(Terminated, err, m.Term(err.Error()))
}

// settle returns d with the reason and the broker call's error joined.
func (p *Processor) settle(d Disposition, reason, brokerErr error) (Disposition, error) {
	if brokerErr != nil {
		brokerErr = fmt.Errorf("consume: tell the broker %s: %w", d, brokerErr)
	}
	return d, errors.Join(reason, brokerErr)
}

// heartbeat sends m.InProgress every Heartbeat until the returned func is
// called (which waits for the sender to stop, so no InProgress follows the
// Ack or Nak).
func (p *Processor) heartbeat(m Message) (stop func()) {
	if p.cfg.Heartbeat <= 0 {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(p.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := m.InProgress(); err != nil {
					p.cfg.Logger.Debug("consume: InProgress failed", "err", err)
				}
			}
		}
	}()
	return func() { close(done); <-stopped }
}
