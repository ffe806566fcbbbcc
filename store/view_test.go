package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestViewWalkHoldsNoMemtable: a stream read from a view (a follower's
// InstallSnapshot, a backup) goes at its reader's pace while commits go on.
// Read through one iterator, it held every memtable that existed when the
// iterator opened, flushed or not, for as long as the stream took: memory
// that Options.MemoryBound does not count. The walk calls its function with
// no iterator open, so a memtable flushed meanwhile is freed at once, and
// the records it streams are still those of the view's commit.
func TestViewWalkHoldsNoMemtable(t *testing.T) {
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		KeyFilterSize: -1, walkChunk: 64 << 10,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("v"), 2000)
	record := func(i int) fsm.RecordChange {
		return fsm.RecordChange{Key: fmt.Appendf(nil, "key-%06d", i), New: append(fmt.Appendf(nil, "%06d", i), body...),
			NewExpiresAt: 100}
	}
	const inView = 100 // 200 KiB: the memtable the walk starts on holds them
	for i := range inView {
		commitRecords(t, s, uint64(i+1), record(i))
	}
	v, err := s.View()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	next, held := inView, int64(0)
	var seen []string
	err = v.Records(func(enc []byte) error {
		seen = append(seen, string(enc[:6]))
		// Commits after the view, flushed: the memtable the walk started
		// on is no longer the database's.
		for range 10 {
			commitRecords(t, s, uint64(next+1), record(next))
			next++
		}
		if err := s.Sync(); err != nil {
			return err
		}
		held = max(held, s.db.Metrics().MemTable.ZombieCount)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != inView {
		t.Fatalf("the walk saw %d records, want the view's %d", len(seen), inView)
	}
	for i, id := range seen {
		if id != fmt.Sprintf("%06d", i) {
			t.Fatalf("record %d of the walk is %s", i, id)
		}
	}
	// With no reader, Pebble itself keeps one flushed memtable (for reuse).
	commitRecords(t, s, uint64(next+1), record(next))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if kept := s.db.Metrics().MemTable.ZombieCount; held > kept {
		t.Fatalf("%d flushed memtables were held while the walk's function ran, %d with no walk", held, kept)
	}
}
