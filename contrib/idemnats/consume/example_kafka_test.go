package consume_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// kafkaRecord is what every Kafka client's record carries (franz-go's
// *kgo.Record, segmentio's kafka.Message, confluent's *kafka.Message): map
// yours onto it. Kafka has no per-message acknowledgement: a consumer
// commits, per partition, the offset up to which it is done.
type kafkaRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Headers   map[string]string
	Value     []byte
}

// kafkaMessage adapts a record to consume.Message. Ack marks the record done,
// so the poll loop may commit its offset; Nak asks the loop to seek the
// partition back to it after delay (the records after it come again, and the
// helper acknowledges those already done without running them); Term marks
// it done after sending it to a dead-letter topic. Kafka has no ack deadline
// to push back (only max.poll.interval.ms, which the poll loop keeps), so
// InProgress does nothing, and it does not count deliveries.
type kafkaMessage struct {
	rec     kafkaRecord
	done    func(kafkaRecord)
	seek    func(kafkaRecord, time.Duration)
	deadLtr func(kafkaRecord, string) error
}

func (m kafkaMessage) Data() []byte              { return m.rec.Value }
func (m kafkaMessage) Header(name string) string { return m.rec.Headers[name] }
func (m kafkaMessage) Deliveries() int           { return 0 }
func (m kafkaMessage) InProgress() error         { return nil }
func (m kafkaMessage) Ack() error                { m.done(m.rec); return nil }
func (m kafkaMessage) Nak(d time.Duration) error { m.seek(m.rec, d); return nil }
func (m kafkaMessage) Term(reason string) error {
	if err := m.deadLtr(m.rec, reason); err != nil {
		return err
	}
	m.done(m.rec)
	return nil
}

// offsetKey keys a record by where it sits in the log. It holds only while
// the topic is never recreated and the producer is idempotent
// (enable.idempotence): a producer's retry that wrote the record twice puts
// it at two offsets, under two keys.
func offsetKey(m consume.Message) (string, error) {
	r := m.(kafkaMessage).rec
	return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset), nil
}

// Example_kafka processes records from Kafka once per producer-assigned
// event id (offsetKey keys them by topic/partition/offset instead): each
// record's offset is committed only after its result is recorded.
func Example_kafka() {
	idem, err := client.New(client.Config{Addrs: []string{"idemnode-0:7400", "idemnode-1:7400", "idemnode-2:7400"}})
	if err != nil {
		log.Fatal(err)
	}
	defer idem.Close()
	p, err := consume.New(consume.Config{
		Client: idem,
		Scope:  "kafka/orders/ship", // the consumer group's kind of work
		Key:    consume.FromHeader("event-id"),
		TTL:    7 * 24 * time.Hour, // at least the topic's retention
	})
	if err != nil {
		log.Fatal(err)
	}
	ship := func(ctx context.Context, m consume.Message) ([]byte, error) {
		// The side effect, once per event id.
		return []byte("shipped"), nil
	}
	var records []kafkaRecord // from your client's poll, several partitions
	processPoll(context.Background(), p, records, ship, func(rec kafkaRecord) kafkaMessage {
		return kafkaMessage{
			rec:     rec,
			done:    func(r kafkaRecord) { /* mark r.Offset+1 committable for r.Partition */ },
			seek:    func(r kafkaRecord, d time.Duration) { /* pause r.Partition for d, then seek to r.Offset */ },
			deadLtr: func(r kafkaRecord, reason string) error { /* produce r to orders.dlq */ return nil },
		}
	})
	// Commit the committable offsets here, after the records are done.
}

// processPoll processes one poll's records. A record handed back (Retry)
// seeks its partition back to it: the rest of that partition in this poll
// is skipped, or their offsets would be committed past a record that never
// ran. Other partitions go on.
func processPoll(ctx context.Context, p *consume.Processor, records []kafkaRecord, h consume.Handler, adapt func(kafkaRecord) kafkaMessage) {
	seekingBack := map[int32]bool{}
	for _, rec := range records {
		if seekingBack[rec.Partition] {
			continue
		}
		if d, err := p.Process(ctx, adapt(rec), h); d == consume.Retry {
			log.Printf("partition %d restarts from offset %d: %v", rec.Partition, rec.Offset, err)
			seekingBack[rec.Partition] = true
		}
	}
}
