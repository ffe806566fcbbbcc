package consume_test

import (
	"context"
	"log"
	"strconv"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// sqsQueue is the part of the SQS API the helper needs (aws-sdk-go-v2's
// sqs.Client has DeleteMessage and ChangeMessageVisibility: wrap them).
type sqsQueue interface {
	Delete(ctx context.Context, receiptHandle string) error
	ChangeVisibility(ctx context.Context, receiptHandle string, timeout time.Duration) error
}

// sqsMessage adapts a received SQS message: Ack deletes it, Nak makes it
// visible again after delay, InProgress pushes its visibility timeout back,
// Deliveries is ApproximateReceiveCount. SQS has no terminate: Term deletes
// the message (send it to a dead-letter queue first if you keep those), and
// a message that keeps failing goes to the queue's redrive dead-letter queue
// after maxReceiveCount receives, SQS's counterpart of MaxDeliver.
type sqsMessage struct {
	q                   sqsQueue
	body, receiptHandle string
	attributes          map[string]string // message attributes and system attributes
	visibility          time.Duration
	approxReceiveCount  int
}

func (m sqsMessage) Data() []byte              { return []byte(m.body) }
func (m sqsMessage) Header(name string) string { return m.attributes[name] }
func (m sqsMessage) Deliveries() int           { return m.approxReceiveCount }
func (m sqsMessage) Ack() error                { return m.q.Delete(context.Background(), m.receiptHandle) }
func (m sqsMessage) Term(string) error         { return m.q.Delete(context.Background(), m.receiptHandle) }
func (m sqsMessage) Nak(d time.Duration) error {
	return m.q.ChangeVisibility(context.Background(), m.receiptHandle, d)
}
func (m sqsMessage) InProgress() error {
	return m.q.ChangeVisibility(context.Background(), m.receiptHandle, m.visibility)
}

// sqsKey is a producer-assigned event-id message attribute when the
// producer sets one: it covers a redelivery and a producer's retried
// SendMessage alike. Otherwise it is the MessageId, which a standard queue's
// redelivery keeps but a retried SendMessage does not (that retry runs
// again). A FIFO queue's MessageDeduplicationId works as event-id does; a
// standard queue has none.
func sqsKey(m consume.Message) (string, error) {
	if id := m.Header("event-id"); id != "" {
		return id, nil
	}
	return consume.FromHeader("MessageId")(m)
}

// Example_sqs processes SQS messages once per key (sqsKey).
func Example_sqs() {
	idem, err := client.New(client.Config{Addrs: []string{"idemnode-0:7400", "idemnode-1:7400", "idemnode-2:7400"}})
	if err != nil {
		log.Fatal(err)
	}
	defer idem.Close()
	const visibility = 30 * time.Second
	p, err := consume.New(consume.Config{
		Client:    idem,
		Scope:     "sqs/invoices/send",
		Key:       sqsKey,
		Heartbeat: visibility / 3, // keeps the message invisible while it runs
	})
	if err != nil {
		log.Fatal(err)
	}
	send := func(ctx context.Context, m consume.Message) ([]byte, error) {
		return []byte("sent"), nil // the side effect, once per key
	}
	var q sqsQueue
	type received struct{ Body, ReceiptHandle, MessageID, EventID, ReceiveCount string }
	var batch []received // from ReceiveMessage, with MessageAttributeNames and MessageSystemAttributeNames set
	for _, r := range batch {
		n, _ := strconv.Atoi(r.ReceiveCount)
		m := sqsMessage{q: q, body: r.Body, receiptHandle: r.ReceiptHandle, visibility: visibility,
			attributes: map[string]string{"MessageId": r.MessageID, "event-id": r.EventID}, approxReceiveCount: n}
		if _, err := p.Process(context.Background(), m, send); err != nil {
			log.Print(err)
		}
	}
}
