package store

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/idemnode/idemnode/fsm"
)

// TestEventsAnswerFromPebbleBelowTheBufferedChanges: a read of the feed's
// oldest events, which the buffer's changes do not reach, leaves the
// buffer as it is; a read that reaches them sees them, added or pruned.
func TestEventsAnswerFromPebbleBelowTheBufferedChanges(t *testing.T) {
	s, err := Open("fsm", Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 4 << 20,
		KeyFilterSize: -1, Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commitEvents := func(index uint64, evs ...fsm.EventChange) {
		t.Helper()
		if err := s.Commit(&fsm.Changes{Meta: fsm.Meta{Applied: index}, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	add := func(seq uint64) fsm.EventChange {
		return fsm.EventChange{Seq: seq, New: fmt.Appendf(nil, "event %d", seq)}
	}
	read := func(after uint64, limit int) string {
		t.Helper()
		evs, err := s.Events(after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%q", evs)
	}
	commitEvents(1, add(1), add(2), add(3))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	commitEvents(2, add(4), add(5)) // buffered

	if got, want := read(0, 2), `["event 1" "event 2"]`; got != want || !s.buf.events {
		t.Fatalf("oldest two: %s, buffer kept %v; want %s, kept", got, s.buf.events, want)
	}
	if got, want := read(1, 4), `["event 2" "event 3" "event 4" "event 5"]`; got != want {
		t.Fatalf("through the buffered: %s, want %s", got, want)
	}
	if s.buf.events {
		t.Fatal("a read past Pebble's events left the buffer undrained")
	}

	commitEvents(3, fsm.EventChange{Seq: 1}, fsm.EventChange{Seq: 2}, add(6)) // prune two, add one: buffered
	if got, want := read(2, 1), `["event 3"]`; got != want || !s.buf.events {
		t.Fatalf("past the prune: %s, buffer kept %v; want %s, kept", got, s.buf.events, want)
	}
	if got, want := read(0, 1), `["event 3"]`; got != want {
		t.Fatalf("from before the buffered prune: %s, want %s (a pruned event came back)", got, want)
	}
	if got, want := read(5, 10), `["event 6"]`; got != want {
		t.Fatalf("the newest: %s, want %s", got, want)
	}
}
