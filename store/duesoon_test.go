package store

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestDueSoonKeepsEachKeysLastChange: what is kept for a key is always its
// last change, and only while that is due within the horizon and fits.
func TestDueSoonKeepsEachKeysLastChange(t *testing.T) {
	const now = int64(1000)
	k := []byte("k")
	soon := now + 30e9
	cases := []struct {
		name    string
		budget  int64
		changes []fsm.RecordChange
		due     int64
		want    string // "" for nothing kept
	}{
		{"a claim due at its lease's end", 1 << 20,
			[]fsm.RecordChange{{Key: k, New: []byte("pending"), NewExpiresAt: soon}}, soon, "pending"},
		{"asked for another due time", 1 << 20,
			[]fsm.RecordChange{{Key: k, New: []byte("pending"), NewExpiresAt: soon}}, soon + 1, ""},
		{"completed: due at its TTL, past the horizon", 1 << 20, []fsm.RecordChange{
			{Key: k, New: []byte("pending"), NewExpiresAt: soon},
			{Key: k, HadOld: true, OldExpiresAt: soon, New: []byte("done"), NewExpiresAt: now + 86400e9}}, soon, ""},
		{"changed at the same due time", 1 << 20, []fsm.RecordChange{
			{Key: k, New: []byte("pending"), NewExpiresAt: soon},
			{Key: k, HadOld: true, OldExpiresAt: soon, New: []byte("checkpointed"), NewExpiresAt: soon}}, soon, "checkpointed"},
		{"deleted", 1 << 20, []fsm.RecordChange{
			{Key: k, New: []byte("pending"), NewExpiresAt: soon},
			{Key: k, HadOld: true, OldExpiresAt: soon}}, soon, ""},
		{"too large for the budget", soonCost(k, []byte("pending")) - 1,
			[]fsm.RecordChange{{Key: k, New: []byte("pending"), NewExpiresAt: soon}}, soon, ""},
		{"a change too large drops the kept one", soonCost(k, []byte("pending")), []fsm.RecordChange{
			{Key: k, New: []byte("pending"), NewExpiresAt: soon},
			{Key: k, HadOld: true, OldExpiresAt: soon, New: []byte("pending, larger"), NewExpiresAt: soon}}, soon, ""},
		{"none kept when turned off", 0,
			[]fsm.RecordChange{{Key: k, New: []byte("pending"), NewExpiresAt: soon}}, soon, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := dueSoon{budget: tc.budget}
			for _, rc := range tc.changes {
				d.note([]fsm.RecordChange{rc}, []placement{{}}, now)
			}
			enc, ok := d.get(k, tc.due)
			if got := string(enc); ok != (tc.want != "") || got != tc.want {
				t.Fatalf("get = %q, %v; want %q", got, ok, tc.want)
			}
			var held int64
			for key, r := range d.recs {
				held += soonCost([]byte(key), r.enc)
			}
			if d.bytes != held || d.bytes > max(tc.budget, 0) {
				t.Fatalf("%d bytes counted for %d held, want them equal and within the budget %d", d.bytes, held, tc.budget)
			}
		})
	}
}

// TestDueTakesKeptRecordsWithoutReadingPebble: records whose lease ends
// soon come back from Due without a read of their blocks. Both stores hold
// the same flushed records; the one that keeps none reads a data block for
// each, the other only walks the index.
func TestDueTakesKeptRecordsWithoutReadingPebble(t *testing.T) {
	const records, lease = 2000, int64(30e9)
	reads := map[string]int64{}
	for _, kept := range []int64{0, -1} {
		s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 4 << 20,
			KeyFilterSize: -1, dueSoonSize: kept, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range records {
			key := fmt.Appendf(nil, "key-%06d", (i*7919)%records) // not in the index's order
			commitRecords(t, s, uint64(i+1), fsm.RecordChange{Key: key, New: fmt.Appendf(nil, "pending %d", i), NewExpiresAt: lease})
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		before := blockReads(s)
		due, err := s.Due(lease, records)
		if err != nil || len(due) != records {
			t.Fatalf("Due: %d records (%v), want %d", len(due), err, records)
		}
		if got := string(due[0]); got != "pending 0" {
			t.Fatalf("the first record due is %q, want key-000000's", got)
		}
		reads[fmt.Sprint(kept)] = blockReads(s) - before
	}
	if kept, none := reads["0"], reads["-1"]; none < records/2 || kept > none/10 {
		t.Fatalf("Due read %d blocks keeping the records and %d keeping none; want a block per record without them, "+
			"and a tenth of that at most with them", kept, none)
	}
}

// blockReads counts the blocks the store has asked its block cache for.
func blockReads(s *Store) int64 {
	m := s.db.Metrics().BlockCache
	return m.Hits + m.Misses
}
