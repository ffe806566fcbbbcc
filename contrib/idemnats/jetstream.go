// Package idemnats processes the messages of a NATS JetStream consumer once
// per idempotency key, with idemnode: a Handler (NewHandler) claims each
// message's key before the handler runs and acknowledges the message only
// after the result is recorded. The broker-neutral part is package consume;
// this package adapts JetStream to it. docs/CONSUMERS.md states the
// guarantee and its limits.
package idemnats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// MsgID takes the key from the Nats-Msg-Id header, the id JetStream itself
// deduplicates publishes by within the stream's Duplicates window; idemnode
// keeps it for the Config's TTL, past that window and across redeliveries.
func MsgID() consume.KeyFunc { return consume.FromHeader(nats.MsgIdHdr) }

// NewMessage adapts one JetStream delivery to consume.Message.
func NewMessage(m jetstream.Msg) consume.Message { return message{m} }

// message is a jetstream.Msg seen as a consume.Message.
type message struct{ m jetstream.Msg }

func (m message) Data() []byte              { return m.m.Data() }
func (m message) Header(name string) string { return m.m.Headers().Get(name) }
func (m message) Ack() error                { return m.m.Ack() }
func (m message) InProgress() error         { return m.m.InProgress() }
func (m message) Term(reason string) error  { return m.m.TermWithReason(reason) }

func (m message) Deliveries() int {
	md, err := m.m.Metadata()
	if err != nil {
		return 0
	}
	return int(md.NumDelivered)
}

func (m message) Nak(delay time.Duration) error {
	if delay <= 0 {
		return m.m.Nak()
	}
	return m.m.NakWithDelay(delay)
}

// Handler processes the messages of one subscription to a JetStream
// consumer: give Handle to cons.Consume, and after stopping the
// subscription, Drain it.
type Handler struct {
	ctx  context.Context
	lane *consume.Lane
}

// NewHandler returns the handler of one subscription to cons: each message
// runs h through a consume.Processor built from cfg (one consume.Lane), with
// these JetStream defaults for what cfg leaves zero:
//
//   - Key: MsgID (the Nats-Msg-Id header).
//   - Scope: "jetstream/<stream>/<consumer>", so competing subscribers of one
//     durable consumer share keys and two consumers of one stream do not.
//     An ephemeral consumer's name changes when it is made again, and a
//     renamed consumer runs every message again: give such consumers a
//     Scope. The scope names no NATS account or domain: two accounts'
//     streams of one name need Scopes of their own.
//   - Heartbeat: a third of the consumer's AckWait, so a handler slower than
//     AckWait, or a message held while its key is busy elsewhere, is not
//     redelivered while it is worked on.
//
// It refuses a consumer that does not acknowledge explicitly
// (AckExplicitPolicy), one without a delivery limit (MaxDeliver -1, the
// default: a message whose handler always fails would loop forever), a
// Heartbeat not below AckWait, and a negative Heartbeat (none) with a
// HoldFor not below AckWait (the held message would be redelivered).
//
// A message whose handler keeps failing is handed back until MaxDeliver
// ends it, and JetStream publishes its MAX_DELIVERIES advisory; the key was
// released after each failure. Only failures of the handler and messages
// given back after HoldFor spend deliveries. ctx ends the work of every
// message in flight (their keys are released and the messages handed back).
//
// Subscribe with cons.Consume(hd.Handle, jetstream.PullMaxMessages(n)) for
// a small n (Depth, or a few more): messages the client has fetched but
// the lane has not taken get no InProgress, and the client fetches 500 by
// default, which AckWait may not cover. With cfg.Depth above 1, set the
// consumer's MaxAckPending to at least Depth times the number of
// subscribers.
func NewHandler(ctx context.Context, cons jetstream.Consumer, cfg consume.Config, h consume.Handler) (*Handler, error) {
	info := cons.CachedInfo()
	if info == nil {
		return nil, errors.New("idemnats: the consumer has no cached info")
	}
	cc := info.Config
	if cc.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("idemnats: consumer %s acks with %s; want explicit acknowledgements (AckExplicitPolicy), or a message could be acknowledged before its result is recorded", info.Name, cc.AckPolicy)
	}
	if cc.MaxDeliver <= 0 {
		return nil, fmt.Errorf("idemnats: consumer %s has no MaxDeliver; set one (such as 5), or a message whose handler always fails is delivered forever", info.Name)
	}
	if cfg.Key == nil {
		cfg.Key = MsgID()
	}
	if cfg.Scope == "" {
		cfg.Scope = "jetstream/" + info.Stream + "/" + info.Name
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = cc.AckWait / 3
	}
	p, err := consume.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemnats: %w", err)
	}
	switch {
	case cfg.Heartbeat >= cc.AckWait:
		return nil, fmt.Errorf("idemnats: Heartbeat %s is not below consumer %s's AckWait %s: messages would be redelivered while they run", cfg.Heartbeat, info.Name, cc.AckWait)
	case cfg.Heartbeat < 0 && p.HoldFor() >= cc.AckWait:
		return nil, fmt.Errorf("idemnats: without a Heartbeat, HoldFor %s must be below consumer %s's AckWait %s, or a held message is redelivered", p.HoldFor(), info.Name, cc.AckWait)
	}
	return &Handler{ctx: ctx, lane: p.Lane(h)}, nil
}

// Handle is the jetstream.MessageHandler: it returns once the message is
// taken into the lane (at once unless Depth messages are in flight).
func (hd *Handler) Handle(m jetstream.Msg) {
	if err := hd.lane.Go(hd.ctx, NewMessage(m)); err != nil {
		// Shutting down (ctx ended, or drained): hand the message back
		// for another subscriber.
		_ = m.Nak()
	}
}

// Drain makes Handle hand every further message back (Nak), hands back at
// once the messages waiting for a busy key or for idemnode, and returns when
// every message it took is done (acknowledged, handed back or ended).
// Stop the subscription first: its callback may still run for a moment
// after ConsumeContext.Stop returns.
func (hd *Handler) Drain() { hd.lane.Drain() }
