package consume_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idemnats/consume"
)

// TestKafkaPollSkipsOnlyTheRetriedPartition: a record handed back stops
// its own partition for the rest of the poll, while another partition's
// records are still processed (here ended: they have no key).
func TestKafkaPollSkipsOnlyTheRetriedPartition(t *testing.T) {
	cl, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}}) // never dialled: no record is claimed
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// p0/o0's key lookup fails (Retry); every other record has no key (Term).
	key := func(m consume.Message) (string, error) {
		if m.Header("at") == "0/0" {
			return "", errors.New("schema registry unreachable")
		}
		return "", consume.ErrNoKey
	}
	p, err := consume.New(consume.Config{Client: cl, Scope: "kafka/t", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var done, seeks []string
	at := func(r kafkaRecord) string { return fmt.Sprintf("%d/%d", r.Partition, r.Offset) }
	records := []kafkaRecord{{Partition: 0, Offset: 0}, {Partition: 1, Offset: 0}, {Partition: 0, Offset: 1}, {Partition: 1, Offset: 1}}
	processPoll(context.Background(), p, records, func(context.Context, consume.Message) ([]byte, error) {
		t.Error("the handler ran")
		return nil, nil
	}, func(rec kafkaRecord) kafkaMessage {
		rec.Headers = map[string]string{"at": at(rec)}
		return kafkaMessage{rec: rec,
			done:    func(r kafkaRecord) { done = append(done, at(r)) },
			seek:    func(r kafkaRecord, _ time.Duration) { seeks = append(seeks, at(r)) },
			deadLtr: func(kafkaRecord, string) error { return nil },
		}
	})
	if fmt.Sprint(seeks) != "[0/0]" || fmt.Sprint(done) != "[1/0 1/1]" {
		t.Errorf("seeks %v, done %v; want partition 0 seeked back to 0/0 and skipped, partition 1 done", seeks, done)
	}
}
