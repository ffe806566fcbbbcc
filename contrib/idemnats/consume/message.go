// Package consume processes the messages of an at-least-once stream (NATS
// JetStream, Kafka, SQS) once per idempotency key: it claims the message's key
// in idemnode before the handler runs, records the handler's result, and only
// then acknowledges the message. A redelivery of a message whose result is
// recorded is acknowledged without running the handler; one whose key another
// consumer holds goes back to the broker with a delay. The package knows no
// broker: an adapter (package idemnats for JetStream) turns the broker's
// message into a Message. docs/CONSUMERS.md states the guarantee and its
// limits.
package consume

import (
	"context"
	"time"
)

// Message is one delivery of a message, as Process needs it from the broker.
// Ack, Nak, InProgress and Term are each called at most once per delivery,
// except InProgress, which Process repeats while the handler runs.
type Message interface {
	// Data is the payload.
	Data() []byte
	// Header returns the first value of the named header, "" when absent.
	Header(name string) string
	// Deliveries counts the deliveries of this message so far, 1 on the
	// first; 0 when the broker does not say.
	Deliveries() int
	// Ack tells the broker the message is done: it is not delivered again.
	Ack() error
	// Nak hands the message back to be delivered again after delay.
	Nak(delay time.Duration) error
	// InProgress tells the broker the message is still being worked on, so
	// that its acknowledgement deadline does not pass (JetStream's AckWait,
	// SQS's visibility timeout). A broker without one does nothing.
	InProgress() error
	// Term tells the broker never to deliver the message again, for reason.
	Term(reason string) error
}

// Handler runs the message's side effect and returns the result to record.
// A nil error records the result: every later delivery of the key is
// acknowledged without running the handler. An error marked with
// client.Permanent records it too (as the error's text when the result is
// empty) and ends the message (Term). Any other error releases the key and
// hands the message back to the broker for another delivery.
//
// ctx ends when idemnode answers a lease extension with FENCED (another
// claim took the key over; cause client.ErrFenced) or the consumer stops:
// the handler should stop then, before its side effect. It does not end when
// the lease merely runs out while idemnode cannot be reached: a handler that
// outlives its lease during an outage may run beside a new holder, so pass
// client.RunFrom(ctx).Token() to a resource that rejects stale tokens when
// that matters.
//
// A panic of the handler releases the key, hands the message back (Nak)
// and propagates: in a Lane it ends the process, as any goroutine's panic
// does.
type Handler func(ctx context.Context, m Message) ([]byte, error)
