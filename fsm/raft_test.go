package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// makeLog is the committed entry carrying c at index (Consul's makeLog).
func makeLog(index uint64, c *Command) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: EncodeCommand(c)}
}

// fakeSink is a raft.SnapshotSink over a buffer; fail makes every write fail.
type fakeSink struct {
	bytes.Buffer
	fail              bool
	closed, cancelled bool
}

var errDiskFull = errors.New("disk full")

func (s *fakeSink) Write(p []byte) (int, error) {
	if s.fail {
		return 0, errDiskFull
	}
	return s.Buffer.Write(p)
}
func (s *fakeSink) ID() string    { return "1-42-test" }
func (s *fakeSink) Cancel() error { s.cancelled = true; return nil }
func (s *fakeSink) Close() error  { s.closed = true; return nil }

// closeTracker records that Restore closed its reader.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func applyLog(t *testing.T, f *FSM, l *raft.Log) Result {
	t.Helper()
	res, ok := f.Apply(l).(Result)
	if !ok {
		t.Fatalf("Apply(%d) returned %T, want Result", l.Index, f.Apply(l))
	}
	return res
}

func TestFSMApplyReturnsResult(t *testing.T) {
	f := NewFSM()
	res := applyLog(t, f, makeLog(1, claim("k", "o1", at(0))))
	if res.Outcome != OutcomeWon || res.Record.Token != tok(1) {
		t.Fatalf("claim: %+v", res)
	}
	if res := applyLog(t, f, makeLog(2, complete("k", tok(1), charged, at(1)))); res.Outcome != OutcomeOK {
		t.Fatalf("complete: %v", res.Outcome)
	}
	res = applyLog(t, f, makeLog(5, batch(claim("k", "o2", at(2)), claim("x", "o2", at(2)))))
	if len(res.Batch) != 2 || res.Batch[0].Outcome != OutcomeCompleted || res.Batch[1].Record.Token != TokenFor(5, 1) {
		t.Fatalf("batch: %+v", res)
	}
	if r, _ := f.Get(rk("k")); !bytes.Equal(r.Response.Body, charged.Body) {
		t.Fatalf("replayed body %q", r.Response.Body)
	}
}

func TestFSMApplyIgnoresOtherLogTypes(t *testing.T) {
	f := NewFSM()
	before := f.Digest()
	for i, typ := range []raft.LogType{raft.LogNoop, raft.LogBarrier, raft.LogConfiguration} {
		if res := f.Apply(&raft.Log{Index: uint64(i + 1), Type: typ, Data: []byte("not a command")}); res != nil {
			t.Fatalf("%v entry returned %v", typ, res)
		}
	}
	if f.Digest() != before {
		t.Fatal("a non-command entry changed the state")
	}
}

// TestFSMApplyPanicsOnGarbage: a node that cannot decode the log stops.
func TestFSMApplyPanicsOnGarbage(t *testing.T) {
	valid := EncodeCommand(claim("k", "o1", at(0)))
	for name, data := range map[string][]byte{
		"empty": nil, "garbage": []byte("\xff\xfe\xfd"), "truncated": valid[:len(valid)-2],
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "log entry 77") {
					t.Fatalf("panic %q, want one naming entry 77", msg)
				}
			}()
			NewFSM().Apply(&raft.Log{Index: 77, Type: raft.LogCommand, Data: data})
			t.Fatal("Apply returned on an undecodable entry")
		})
	}
}

func TestFSMApplyBatchMatchesApply(t *testing.T) {
	logs := []*raft.Log{
		makeLog(1, claim("k", "o1", at(0))), {Index: 2, Type: raft.LogNoop},
		makeLog(3, claim("k", "o2", at(1))), makeLog(4, release("k", tok(1), at(2))),
	}
	a, b := NewFSM(), NewFSM()
	got := a.ApplyBatch(logs)
	for i, l := range logs {
		want := b.Apply(l)
		if (want == nil) != (got[i] == nil) || (want != nil && !sameResult(want.(Result), got[i].(Result))) {
			t.Fatalf("entry %d: ApplyBatch %+v, Apply %+v", i, got[i], want)
		}
	}
	if a.Digest() != b.Digest() {
		t.Fatal("ApplyBatch and Apply reached other states")
	}
}

// TestFSMSnapshotPersistRestore: Snapshot captures the state at the call;
// entries applied before Persist do not leak into it; Restore reproduces it.
func TestFSMSnapshotPersistRestore(t *testing.T) {
	f := NewFSM()
	for i, c := range []*Command{claim("a", "o1", at(0)), complete("a", tok(1), charged, at(1)),
		claim("b", "o2", at(2)), claimWith("c", "fp", "o3", sec, 60*sec, at(3))} {
		applyLog(t, f, makeLog(uint64(i+1), c))
	}
	captured := f.Digest()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	later := []*raft.Log{makeLog(10, release("b", tok(3), at(4))), makeLog(11, expire(10, at(120)))}
	f.ApplyBatch(later)
	sink := &fakeSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatalf("persist: %v (closed %v, cancelled %v)", err, sink.closed, sink.cancelled)
	}
	snap.Release()

	g := NewFSM()
	rc := &closeTracker{Reader: &sink.Buffer}
	if err := g.Restore(rc); err != nil || !rc.closed {
		t.Fatalf("restore: %v (reader closed %v)", err, rc.closed)
	}
	if g.Digest() != captured {
		t.Fatal("restored digest differs from the state at Snapshot")
	}
	g.ApplyBatch(later) // catching up on the log reaches the leader's state
	if g.Digest() != f.Digest() {
		t.Fatal("restore + replay differs from the live state")
	}
}

func TestFSMPersistCancelsOnError(t *testing.T) {
	f := NewFSM()
	applyLog(t, f, makeLog(1, claim("k", "o1", at(0))))
	snap, _ := f.Snapshot()
	sink := &fakeSink{fail: true}
	err := snap.Persist(sink)
	if !errors.Is(err, errDiskFull) || !sink.cancelled || sink.closed {
		t.Fatalf("persist to a failing sink: %v (cancelled %v, closed %v)", err, sink.cancelled, sink.closed)
	}
}

func TestFSMRestoreErrorKeepsStateAndClosesReader(t *testing.T) {
	f := NewFSM()
	applyLog(t, f, makeLog(1, claim("k", "o1", at(0))))
	before := f.Digest()
	rc := &closeTracker{Reader: strings.NewReader("IDEMSNAP garbage")}
	if err := f.Restore(rc); err == nil || !rc.closed || f.Digest() != before {
		t.Fatalf("restore of garbage: %v (closed %v, state kept %v)", err, rc.closed, f.Digest() == before)
	}
}

// TestSnapshotWhileApplying runs Persist, reads and Apply at once; with
// -race it checks the copy-on-write view and the locks, and the persisted
// bytes must still be exactly the state at Snapshot.
func TestSnapshotWhileApplying(t *testing.T) {
	f := NewFSM()
	for i := range 2000 {
		applyLog(t, f, makeLog(uint64(i+1), claim(fmt.Sprintf("k%04d", i), "o1", at(0))))
	}
	captured := f.Digest()
	snap, _ := f.Snapshot()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 2000 {
			k := fmt.Sprintf("k%04d", i)
			f.Apply(makeLog(uint64(3000+i), complete(k, tok(uint64(i+1)), charged, at(1))))
			f.Apply(makeLog(uint64(6000+i), claim(k+"x", "o2", at(2))))
		}
	})
	wg.Go(func() {
		for i := range 2000 {
			f.Get(rk(fmt.Sprintf("k%04d", i)))
			f.GetWatch(rk(fmt.Sprintf("k%04d", 1999-i)))
		}
	})
	sink := &fakeSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if g := restored(t, sink.Bytes()); g.Digest() != captured {
		t.Fatal("snapshot taken before concurrent applies does not hold the captured state")
	}
	if f.Len() != 4000 || f.Waiting() != 0 {
		t.Fatalf("len %d waiting %d after the concurrent run", f.Len(), f.Waiting())
	}
}
