package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// Process gives it back without the handler failing: idemnode stayed
	// unreachable or the key stayed held elsewhere for HoldFor (default 1s).
	RetryDelay time.Duration
	// FailureDelay is how long a message waits after the handler failed
	// (default 1s); the broker's own limit (JetStream's MaxDeliver) counts
	// the attempts.
	FailureDelay time.Duration
	// HoldFor bounds how long Process keeps a message (sending InProgress)
	// while its key is held by another consumer, idemnode cannot be
	// reached, or a result that ran cannot yet be recorded (default 2m).
	// Waiting does not spend a delivery of the broker's redelivery limit;
	// only the Nak after HoldFor (or a failed handler) does.
	HoldFor time.Duration
	// MaxResult caps the bytes of a handler's result that are recorded
	// (default 64 KiB, at most what the server stores: 1 MiB by default).
	// A longer result is recorded as its SHA-256 and length, so that
	// recording it is never refused for its size: Process needs the
	// record only as the mark that the message was processed.
	MaxResult int
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
	case cfg.Lease < 0 || cfg.TTL < 0 || cfg.RetryDelay < 0 || cfg.FailureDelay < 0 || cfg.HoldFor < 0 || cfg.Depth < 0 || cfg.MaxResult < 0:
		return nil, errors.New("consume: Lease, TTL, RetryDelay, FailureDelay, HoldFor, Depth and MaxResult must not be negative")
	case cfg.MaxResult > maxStoredBody:
		return nil, fmt.Errorf("consume: Config.MaxResult %d is above the %d bytes idemnode stores", cfg.MaxResult, maxStoredBody)
	}
	if err := checkID(cfg.Tenant, cfg.Scope); err != nil {
		return nil, err
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
	if cfg.HoldFor == 0 {
		cfg.HoldFor = 2 * time.Minute
	}
	if cfg.MaxResult == 0 {
		cfg.MaxResult = defaultMaxResult
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// A claim of a key held elsewhere waits on the server up to RetryDelay,
	// which answers at once when the holder finishes; Process repeats it
	// until HoldFor.
	opts := []client.Option{client.WithWait(cfg.RetryDelay)}
	if cfg.Lease > 0 {
		opts = append(opts, client.WithLease(cfg.Lease))
	}
	if cfg.TTL > 0 {
		opts = append(opts, client.WithTTL(cfg.TTL))
	}
	return &Processor{cfg: cfg, opts: opts}, nil
}

// HoldFor is the Config's HoldFor, defaults applied.
func (p *Processor) HoldFor() time.Duration { return p.cfg.HoldFor }

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
//   - Another holder has the key, or idemnode cannot be reached: Process
//     keeps the message (InProgress every Heartbeat) and claims again until
//     HoldFor has passed, then hands it back (Nak after RetryDelay). Waiting
//     spends no delivery of the broker's limit.
//   - h ran but its result could not be recorded: Process retries recording
//     it under the same token until HoldFor has passed; idemnode accepts it
//     after the lease ended as long as nobody took the key over. Only then
//     is the message handed back (Nak).
//   - No key, a key idemnode refuses (CheckKey, or the claim's
//     InvalidArgument or PermissionDenied), a key reused with another
//     payload, or a key whose record expired: Term, h does not run. A
//     KeyFunc error other than ErrNoKey hands the message back (Nak).
//
// A panic of h releases the key (client.Do), hands the message back (Nak
// after FailureDelay), and propagates.
func (p *Processor) Process(ctx context.Context, m Message, h Handler) (Disposition, error) {
	return p.process(ctx, ctx, m, h)
}

// process is Process, the waits for a busy or unreachable key ending also
// when hold ends (a Lane being drained gives such messages back at once).
func (p *Processor) process(ctx, hold context.Context, m Message, h Handler) (Disposition, error) {
	key, err := p.cfg.Key(m)
	switch {
	case errors.Is(err, ErrNoKey):
		return p.term(m, fmt.Errorf("consume: %w", err))
	case err != nil:
		// The KeyFunc could not tell this time; the next delivery may.
		return p.settle(Retry, fmt.Errorf("consume: take the key: %w", err), m.Nak(p.cfg.RetryDelay))
	}
	if err := CheckKey(key); err != nil {
		return p.term(m, fmt.Errorf("consume: %w", err))
	}
	id := client.ID{Tenant: p.cfg.Tenant, Scope: p.cfg.Scope, Key: key}
	stop := p.heartbeat(m)
	defer stop()
	defer func() {
		if v := recover(); v != nil {
			stop()
			_ = m.Nak(p.cfg.FailureDelay)
			panic(v)
		}
	}()
	var fnErr error
	run := func(ctx context.Context) (client.Response, error) {
		var body []byte
		body, fnErr = h(ctx, m)
		status := 200
		if fnErr != nil {
			status = 500
			if len(body) == 0 {
				body = []byte(fnErr.Error())
			}
		}
		return client.Response{Status: status, Body: bounded(body, p.cfg.MaxResult)}, fnErr
	}
	deadline := time.Now().Add(p.cfg.HoldFor)
	var res client.Result
	for {
		res, err = p.cfg.Client.Do(ctx, id, p.cfg.Fingerprint(m), run, p.opts...)
		if res.Executed || !holdable(err) || !p.pause(hold, deadline, err) {
			break
		}
	}
	if res.Executed && res.Action == client.Complete && err != nil && !errors.Is(err, client.ErrFenced) {
		// h ran; recording its result failed (idemnode unreachable, a
		// quota): record it under the same token instead of running h again.
		if recErr := p.record(ctx, id, res, deadline); recErr == nil {
			err = fnErr
		} else {
			err = errors.Join(err, recErr)
		}
	}
	switch {
	case err == nil && res.Replayed:
		return p.settle(Duplicate, nil, m.Ack())
	case res.Executed && err == fnErr && res.Action == client.Complete && fnErr == nil:
		return p.settle(Processed, nil, m.Ack())
	case res.Executed && err == fnErr && res.Action == client.Complete:
		return p.term(m, fmt.Errorf("consume %s: permanent failure recorded: %w", id, fnErr))
	case res.Executed && res.Action == client.Release && fnErr == nil:
		// The server refused the result (client.Do released the key): a
		// server whose limits are below MaxResult. Another run would repeat
		// the effect and be refused again.
		return p.term(m, fmt.Errorf("consume %s: the handler ran but idemnode refused its result (lower Config.MaxResult): %w", id, err))
	case res.Executed && res.Action == client.Release:
		// Released: the next delivery runs h again. The broker's own limit
		// ends a message that keeps failing, with its own advisory.
		return p.settle(Retry, fmt.Errorf("consume %s: handler failed, key released: %w", id, err), m.Nak(p.cfg.FailureDelay))
	case res.Executed:
		// h ran but its result is not recorded (lost the lease, or idemnode
		// unreachable for HoldFor). Never Ack: the redelivery finds the
		// record completed by whoever took it over, or, once the lease has
		// ended with nobody recording, runs h again.
		p.cfg.Logger.Error("consume: the handler ran but its result is not recorded; the message goes back to the broker", "id", id.String(), "err", err)
		return p.settle(Retry, fmt.Errorf("consume %s: %w", id, err), m.Nak(p.cfg.RetryDelay))
	case errors.Is(err, client.ErrMismatch), errors.Is(err, client.ErrExpired):
		return p.term(m, fmt.Errorf("consume %s: %w", id, err))
	case status.Code(err) == codes.InvalidArgument, status.Code(err) == codes.PermissionDenied:
		// Refused for what the message or the Config is: every delivery
		// would be refused alike.
		return p.term(m, fmt.Errorf("consume %s: idemnode refused the claim: %w", id, err))
	}
	// Still held elsewhere or unreachable after HoldFor, rate-limited, or
	// ctx ended.
	delay := p.cfg.RetryDelay
	if d, ok := client.RetryAfter(err); ok && d > delay {
		delay = d
	}
	return p.settle(Retry, fmt.Errorf("consume %s: %w", id, err), m.Nak(delay))
}

// holdable reports whether a claim's error passes by itself: another holder
// finishes or dies, idemnode comes back, a rate or quota frees up.
func holdable(err error) bool {
	for _, e := range []error{client.ErrInProgress, client.ErrUnavailable, client.ErrRateLimited, client.ErrTooManyWaits, client.ErrQuotaExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// pause waits before the next attempt after err: none when the server
// already waited on a holder (ErrInProgress), else RetryDelay or the
// server's RetryAfter. It reports false, without waiting, when the wait
// would end past deadline or ctx ended.
func (p *Processor) pause(ctx context.Context, deadline time.Time, err error) bool {
	var d time.Duration
	if !errors.Is(err, client.ErrInProgress) {
		d = p.cfg.RetryDelay
		if ra, ok := client.RetryAfter(err); ok && ra > d {
			d = ra
		}
	}
	if ctx.Err() != nil || time.Now().Add(d).After(deadline) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// record stores res's response under its token until idemnode answers OK,
// ctx ends or deadline passes. FENCED or NOT_FOUND ends it at once:
// another claim took the key over.
func (p *Processor) record(ctx context.Context, id client.ID, res client.Result, deadline time.Time) error {
	for {
		outcome, err := p.cfg.Client.Complete(ctx, id, res.Token, res.Response)
		switch {
		case err == nil && outcome == client.OutcomeOK:
			return nil
		case err == nil && (outcome == client.OutcomeFenced || outcome == client.OutcomeNotFound):
			return fmt.Errorf("consume %s: complete answered %s: %w", id, outcome, client.ErrFenced)
		case err == nil:
			return fmt.Errorf("consume %s: complete answered %s", id, outcome)
		}
		p.cfg.Logger.Warn("consume: recording the result failed; retrying under the same token", "id", id.String(), "err", err)
		if !p.pause(ctx, deadline, err) {
			return fmt.Errorf("consume %s: record the result: %w", id, err)
		}
	}
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
	var once sync.Once
	return func() { once.Do(func() { close(done); <-stopped }) }
}
