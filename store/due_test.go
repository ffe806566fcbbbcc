package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestLeaseEndsDrainNothing: a buffered commit that moves records' due
// times away (a lease's end marks a claim abandoned and makes it due at
// its TTL) leaves the next Due to skip their old entries in Pebble rather
// than drain the buffer, a small batch into the memtable's skiplist at
// every Expire. Due still answers as Pebble would after a drain: it skips
// the moved and the deleted records, reads a buffered change that kept its
// due time (no record is kept as due soon here), and raises expLow to the
// first entry it does not skip. A buffered entry due by Due's time does
// drain.
func TestLeaseEndsDrainNothing(t *testing.T) {
	const records = 40
	s, err := Open("fsm", Options{FS: vfs.NewMem(), MemTableSize: 64 << 20, dueSoonSize: -1,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%03d", i) }
	for i := range records {
		commitRecords(t, s, uint64(i+1), fsm.RecordChange{Key: key(i), New: []byte("pending"), NewExpiresAt: 10})
	}
	mustNot(s.Sync()) // the entries due at 10 in Pebble, the buffer empty

	// The buffer now moves three in four away from 10, deletes some and
	// rewrites the rest in place.
	var changes []fsm.RecordChange
	var want []string
	for i := range records {
		rc := fsm.RecordChange{Key: key(i), HadOld: true, OldExpiresAt: 10, New: []byte("abandoned"), NewExpiresAt: 1000}
		switch i % 4 {
		case 1:
			rc.New, rc.NewExpiresAt = nil, 0
		case 2:
			rc.New, rc.NewExpiresAt = []byte("checkpointed"), 10
			want = append(want, "checkpointed")
		}
		changes = append(changes, rc)
	}
	commitRecords(t, s, records+1, changes...)
	due, err := s.Due(20, records)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%q", due); got != fmt.Sprintf("%q", want) {
		t.Fatalf("Due(20) = %s, want %q", got, want)
	}
	if s.buf.batch == nil {
		t.Fatal("Due drained a buffer that inserts no index entry due by its time")
	}
	if low, want := s.expLowNow(), expiryKey(10, key(2)); !bytes.Equal(low, want) {
		t.Fatalf("expLow after Due = %q, want the first entry not skipped, %q", low, want)
	}

	commitRecords(t, s, records+2, fsm.RecordChange{Key: key(2), HadOld: true, OldExpiresAt: 10, New: []byte("extended"), NewExpiresAt: 15})
	due, err = s.Due(20, records)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != len(want) || string(due[len(due)-1]) != "extended" {
		t.Fatalf("Due(20) after a move to 15 = %q, want the checkpointed records and then the extended one", due)
	}
	if s.buf.batch != nil {
		t.Fatal("Due left buffered an index entry due by its time")
	}
}
