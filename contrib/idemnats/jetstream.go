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
//     An ephemeral consumer's name changes when it is made again: give such
//     consumers a Scope.
//   - Heartbeat: a third of the consumer's AckWait, so a handler slower than
//     AckWait is not redelivered while it runs; negative sends none.
//
// The consumer must acknowledge explicitly (AckExplicitPolicy). A message
// whose handler keeps failing is handed back until the consumer's MaxDeliver
// ends it, and JetStream publishes its MAX_DELIVERIES advisory; the key was
// released after each failure. ctx ends the work of every message in flight
// (their keys are released and the messages handed back).
//
// With cfg.Depth above 1, set the consumer's MaxAckPending to at least
// Depth times the number of subscribers, and its AckWait well above the
// time Depth messages take, or JetStream holds back or redelivers messages
// a subscriber has taken but not yet started.
func NewHandler(ctx context.Context, cons jetstream.Consumer, cfg consume.Config, h consume.Handler) (*Handler, error) {
	info := cons.CachedInfo()
	if info == nil {
		return nil, errors.New("idemnats: the consumer has no cached info")
	}
	if info.Config.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("idemnats: consumer %s acks with %s; want explicit acknowledgements (AckExplicitPolicy), or a message could be acknowledged before its result is recorded", info.Name, info.Config.AckPolicy)
	}
	if cfg.Key == nil {
		cfg.Key = MsgID()
	}
	if cfg.Scope == "" {
		cfg.Scope = "jetstream/" + info.Stream + "/" + info.Name
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = info.Config.AckWait / 3
	}
	p, err := consume.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemnats: %w", err)
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

// Drain makes Handle hand every further message back (Nak), and returns
// when every message it took is done (acknowledged, handed back or ended).
// Stop the subscription first: its callback may still run for a moment
// after ConsumeContext.Stop returns.
func (hd *Handler) Drain() { hd.lane.Drain() }
