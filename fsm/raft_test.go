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

// newFSM is an FSM over a fresh in-memory reference store.
func newFSM() *FSM { return NewFSM(NewMachine()) }

// syncCounter is a store that counts Sync calls and fails them with err.
type syncCounter struct {
	Store
	syncs int
	err   error
}

func (s *syncCounter) Sync() error { s.syncs++; return s.err }

func applyLog(t *testing.T, f *FSM, l *raft.Log) Result {
	t.Helper()
	res, ok := f.Apply(l).(Result)
	if !ok {
		t.Fatalf("Apply(%d) returned %T, want Result", l.Index, f.Apply(l))
	}
	return res
}

func TestFSMApplyReturnsResult(t *testing.T) {
	f := newFSM()
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

// TestFSMKeepsConfigurationsApart: a configuration entry returns nothing and
// leaves the records and the digest alone, but the store keeps it with its
// index, so the store alone says what Raft's latest snapshot holds.
func TestFSMKeepsConfigurationsApart(t *testing.T) {
	f := newFSM()
	before := f.Digest()
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "127.0.0.11:7401"}}})
	for i, l := range []*raft.Log{{Type: raft.LogNoop}, {Type: raft.LogBarrier}, {Type: raft.LogConfiguration, Data: conf}} {
		l.Index, l.Term = uint64(i+1), 2
		if res := f.Apply(l); res != nil {
			t.Fatalf("%v entry returned %v", l.Type, res)
		}
	}
	if f.Digest() != before {
		t.Fatal("a non-command entry changed the digest")
	}
	if m := f.Meta(); m.ConfigIndex != 3 || !bytes.Equal(m.Config, conf) || m.Applied != 3 || m.Term != 2 {
		t.Fatalf("meta after a configuration entry: %+v", m)
	}
}

// TestApplySkipsEntriesTheStoreHas: after a restart the log is replayed from
// raft's last snapshot, which may be behind the store; entries at or below
// the store's applied index must not be applied twice on the newer state.
func TestApplySkipsEntriesTheStoreHas(t *testing.T) {
	f := newFSM()
	logs := []*raft.Log{makeLog(1, claim("k", "o1", at(0))), makeLog(2, complete("k", tok(1), charged, at(1))),
		makeLog(3, release("k", tok(1), at(2)))}
	f.ApplyBatch(logs[:2])
	done := f.Digest()
	// Replaying entry 2 on a completed record would answer OK and change
	// nothing, but a replayed claim or release must never act: entry 1's
	// claim would be answered COMPLETED, not WON.
	for i, res := range f.ApplyBatch(logs[:2]) {
		if r := res.(Result); r.Outcome != OutcomeUnknown {
			t.Fatalf("replayed entry %d applied again: %+v", i+1, r)
		}
	}
	if f.Digest() != done || f.Applied() != 2 {
		t.Fatalf("replay changed the state (applied %d)", f.Applied())
	}
	if res := applyLog(t, f, logs[2]); res.Outcome != OutcomeFenced {
		t.Fatalf("the next entry after the replay: %v, want fenced (record completed)", res.Outcome)
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
			newFSM().Apply(&raft.Log{Index: 77, Type: raft.LogCommand, Data: data})
			t.Fatal("Apply returned on an undecodable entry")
		})
	}
}

func TestFSMApplyBatchMatchesApply(t *testing.T) {
	logs := []*raft.Log{
		makeLog(1, claim("k", "o1", at(0))), {Index: 2, Type: raft.LogNoop},
		makeLog(3, claim("k", "o2", at(1))), makeLog(4, release("k", tok(1), at(2))),
	}
	a, b := newFSM(), newFSM()
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

// TestFSMSnapshotSyncsTheStore: a local snapshot writes nothing (the store
// is the snapshot) but makes the store durable before the sink is closed,
// since closing it lets raft drop the log.
func TestFSMSnapshotSyncsTheStore(t *testing.T) {
	st := &syncCounter{Store: NewMemStore()}
	m, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFSM(m)
	applyLog(t, f, makeLog(1, claim("k", "o1", at(0))))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed || sink.cancelled || sink.Len() != 0 {
		t.Fatalf("persist: %v (closed %v, cancelled %v, %d bytes)", err, sink.closed, sink.cancelled, sink.Len())
	}
	if st.syncs != 1 {
		t.Fatalf("store synced %d times, want once", st.syncs)
	}
	snap.Release()
}

func TestFSMPersistCancelsOnError(t *testing.T) {
	m, err := New(&syncCounter{Store: NewMemStore(), err: errDiskFull})
	if err != nil {
		t.Fatal(err)
	}
	f := NewFSM(m)
	applyLog(t, f, makeLog(1, claim("k", "o1", at(0))))
	snap, _ := f.Snapshot()
	sink := &fakeSink{}
	err = snap.Persist(sink)
	if !errors.Is(err, errDiskFull) || !sink.cancelled || sink.closed {
		t.Fatalf("persist with a failing store: %v (cancelled %v, closed %v)", err, sink.cancelled, sink.closed)
	}
}

// TestViewRestoreRoundTrip: a view streams the state at the moment it was
// taken, entries applied later do not leak into it, and Restore reproduces
// it; replaying the later entries reaches the live state.
func TestViewRestoreRoundTrip(t *testing.T) {
	f := newFSM()
	for i, c := range []*Command{claim("a", "o1", at(0)), complete("a", tok(1), charged, at(1)),
		claim("b", "o2", at(2)), claimWith("c", "fp", "o3", sec, 60*sec, at(3))} {
		applyLog(t, f, makeLog(uint64(i+1), c))
	}
	captured := f.Digest()
	v, err := f.View()
	if err != nil {
		t.Fatal(err)
	}
	later := []*raft.Log{makeLog(10, release("b", tok(3), at(4))), makeLog(11, expire(10, at(120)))}
	f.ApplyBatch(later)
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, v); err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != SnapshotSize(v.Meta()) {
		t.Fatalf("stream of %d bytes, SnapshotSize said %d", buf.Len(), SnapshotSize(v.Meta()))
	}
	v.Close()
	g := newFSM()
	rc := &closeTracker{Reader: &buf}
	if err := g.Restore(rc); err != nil || !rc.closed {
		t.Fatalf("restore: %v (reader closed %v)", err, rc.closed)
	}
	if g.Digest() != captured || g.Applied() != 4 || g.Meta().Term != 1 {
		t.Fatalf("restored digest differs from the view, or applied %d term %d", g.Applied(), g.Meta().Term)
	}
	g.ApplyBatch(later) // catching up on the log reaches the leader's state
	if g.Digest() != f.Digest() {
		t.Fatal("restore + replay differs from the live state")
	}
}

func TestFSMRestoreErrorKeepsStateAndClosesReader(t *testing.T) {
	f := newFSM()
	applyLog(t, f, makeLog(1, claim("k", "o1", at(0))))
	before := f.Digest()
	rc := &closeTracker{Reader: strings.NewReader("IDEMSNAP garbage")}
	if err := f.Restore(rc); err == nil || !rc.closed || f.Digest() != before {
		t.Fatalf("restore of garbage: %v (closed %v, state kept %v)", err, rc.closed, f.Digest() == before)
	}
}

// TestSnapshotWhileApplying streams a view while reads and applies run; with
// -race it checks the view and the locks, and the streamed bytes must
// still be exactly the state when the view was taken.
func TestSnapshotWhileApplying(t *testing.T) {
	f := newFSM()
	for i := range 2000 {
		applyLog(t, f, makeLog(uint64(i+1), claim(fmt.Sprintf("k%04d", i), "o1", at(0))))
	}
	captured := f.Digest()
	v, err := f.View()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 2000 {
			k := fmt.Sprintf("k%04d", i)
			f.Apply(makeLog(uint64(3000+2*i), complete(k, tok(uint64(i+1)), charged, at(1))))
			f.Apply(makeLog(uint64(3001+2*i), claim(k+"x", "o2", at(2))))
		}
	})
	wg.Go(func() {
		for i := range 2000 {
			f.Get(rk(fmt.Sprintf("k%04d", i)))
			f.GetWatch(rk(fmt.Sprintf("k%04d", 1999-i)))
		}
	})
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, v); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if g := restored(t, buf.Bytes()); g.Digest() != captured {
		t.Fatal("snapshot taken before concurrent applies does not hold the captured state")
	}
	if f.Len() != 4000 || f.Waiting() != 0 {
		t.Fatalf("len %d waiting %d after the concurrent run", f.Len(), f.Waiting())
	}
}
