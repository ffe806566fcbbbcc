package fsm

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// gateStore holds the first armed read of one kind inside the store until
// released: a slow disk read.
type gateStore struct {
	Store
	armed   atomic.Value // the read to hold: "get", "events" or "next"
	entered chan struct{}
	release chan struct{}
}

func newGateStore() *gateStore {
	g := &gateStore{Store: NewMemStore(), entered: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store("")
	return g
}

func (g *gateStore) hold(what string) {
	if g.armed.CompareAndSwap(what, "") {
		close(g.entered)
		<-g.release
	}
}

func (g *gateStore) Get(key []byte) ([]byte, bool, error) {
	g.hold("get")
	return g.Store.Get(key)
}

func (g *gateStore) Events(after uint64, limit int) ([][]byte, error) {
	g.hold("events")
	return g.Store.Events(after, limit)
}

func (g *gateStore) NextExpiry() (int64, bool, error) {
	g.hold("next")
	return g.Store.NextExpiry()
}

// TestReadsDoNotHoldUpApplyOrOtherReads holds each kind of read inside the
// store (a slow disk) and checks that meanwhile the apply goroutine
// publishes a commit and another reader reads it. With the Machine's lock
// held across the store read, the publish waited for it, and the second
// reader waited behind the publish.
func TestReadsDoNotHoldUpApplyOrOtherReads(t *testing.T) {
	for _, tc := range []struct {
		name, gate string
		read       func(m *Machine)
	}{
		{"Get", "get", func(m *Machine) { m.Get(rk("k1")) }},
		{"GetWatch", "get", func(m *Machine) { m.GetWatch(rk("k1")) }},
		{"Tombstone", "get", func(m *Machine) { m.Tombstone(rk("k1")) }},
		{"Events", "events", func(m *Machine) { m.Events(0, 10) }},
		{"NextExpiry", "next", func(m *Machine) { m.NextExpiry() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateStore()
			m, err := New(g)
			if err != nil {
				t.Fatal(err)
			}
			m.Apply(1, claim("k1", "o1", at(0)))
			g.armed.Store(tc.gate)
			readDone := make(chan struct{})
			go func() { tc.read(m); close(readDone) }()
			select {
			case <-g.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the read never reached the store")
			}
			var r *Record
			done := make(chan struct{})
			go func() {
				m.Apply(2, claim("k2", "o2", at(1)))
				r, _ = m.Get(rk("k2"))
				close(done)
			}()
			select {
			case <-done:
				if r == nil || r.Token != tok(2) {
					t.Errorf("second reader read %+v, want k2 claimed at index 2", r)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("apply and a second reader waited behind a read held in the store")
			}
			close(g.release)
			<-readDone
			<-done
		})
	}
}

// slowStore sleeps in every Get, so a commit often lands between a
// reader's first look at the Machine and its read of the store.
type slowStore struct{ Store }

func (s slowStore) Get(key []byte) ([]byte, bool, error) {
	time.Sleep(50 * time.Microsecond)
	return s.Store.Get(key)
}

// getWatchFunc is GetWatch, or a planted variant of it.
type getWatchFunc func(m *Machine, k RecordKey) (*Record, bool, <-chan struct{})

// lostWakeUps claims and releases one key in turn on the applying goroutine
// while watchers call gw, and counts the watches that missed the change
// they watched for: a watch returned with the PENDING record of the claim
// at index i must be closed once the release at i+1 was applied (its
// ApplyEntries returned, waking the watchers).
func lostWakeUps(t *testing.T, gw getWatchFunc, rounds, watchers int) int64 {
	m, err := New(slowStore{NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	k := rk("k")
	var applied atomic.Uint64 // the last index whose ApplyEntries returned
	var lost, watched atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, ok, ch := gw(m, k)
				if !ok || r.State != StatePending {
					runtime.Gosched()
					continue
				}
				watched.Add(1)
				releasedAt := r.Token>>16 + 1 // TokenFor(index, 0)
				for applied.Load() < releasedAt {
					runtime.Gosched()
				}
				select {
				case <-ch:
				default:
					lost.Add(1)
				}
			}
		}()
	}
	var index uint64
	for range rounds {
		index++
		res := m.Apply(index, claim("k", "o", at(int64(index))))
		if res.Outcome != OutcomeWon {
			t.Fatalf("claim at %d: %v", index, res.Outcome)
		}
		applied.Store(index)
		index++
		if res := m.Apply(index, release("k", tok(index-1), at(int64(index)))); res.Outcome != OutcomeOK {
			t.Fatalf("release at %d: %v", index, res.Outcome)
		}
		applied.Store(index)
	}
	close(stop)
	wg.Wait()
	if watched.Load() == 0 {
		t.Fatal("no watch ever saw the record PENDING: the test checked nothing")
	}
	return lost.Load()
}

// TestGetWatchLosesNoWakeUp: a change committed between GetWatch's read and
// its registration must still wake the watcher.
func TestGetWatchLosesNoWakeUp(t *testing.T) {
	if n := lostWakeUps(t, (*Machine).GetWatch, 2000, 4); n != 0 {
		t.Fatalf("%d watches were never woken by the change they watched for", n)
	}
}

// TestLostWakeUpCheckCatchesReadThenRegister shows the check failing on
// the order that loses wake-ups without a lock: read, then register.
func TestLostWakeUpCheckCatchesReadThenRegister(t *testing.T) {
	readThenRegister := func(m *Machine, k RecordKey) (*Record, bool, <-chan struct{}) {
		r, ok := m.Get(k)
		if !ok || r.State != StatePending {
			return r, ok, nil
		}
		return r, ok, m.watch.add(k).ch
	}
	if n := lostWakeUps(t, readThenRegister, 2000, 4); n == 0 {
		t.Fatal("the check found no lost wake-up in a GetWatch that reads before it registers")
	}
}

// TestGetWatchDropsUnneededRegistrations: a GetWatch of a record that is not
// PENDING (absent, completed) leaves no watch behind, and dropping one does
// not take away another waiter's.
func TestGetWatchDropsUnneededRegistrations(t *testing.T) {
	h := newHarness(t)
	if _, _, ch := h.m.GetWatch(rk("absent")); ch != nil || h.m.Waiting() != 0 {
		t.Fatalf("GetWatch of an absent key: channel %v, %d keys watched", ch, h.m.Waiting())
	}
	tk := h.mustWin("k", "o1", at(0))
	_, _, ch := h.m.GetWatch(rk("k"))
	w := h.m.watch.add(rk("k")) // a concurrent GetWatch that will find it not PENDING
	h.m.watch.drop(rk("k"), w)
	if h.m.Waiting() != 1 {
		t.Fatalf("dropping one registration took away the other waiter's watch")
	}
	h.apply(complete("k", tk, charged, at(1)))
	select {
	case <-ch:
	default:
		t.Fatal("the completion did not wake the watcher")
	}
	if _, _, ch := h.m.GetWatch(rk("k")); ch != nil || h.m.Waiting() != 0 {
		t.Fatalf("GetWatch of a completed record: channel %v, %d keys watched", ch, h.m.Waiting())
	}
}

// commitCheckStore checks every record a Commit writes: live at the
// commit's FSM time, or cut down to a tombstone. Reads outside the lock rely
// on that holding for each command (storeRef); a commit of one command that
// is not a batch has that command's FSM time.
type commitCheckStore struct {
	Store
	err error
}

func (s *commitCheckStore) Commit(c *Changes) error {
	for _, rc := range c.Records {
		if rc.New == nil || s.err != nil {
			continue
		}
		r, err := DecodeRecord(rc.New)
		if err != nil {
			s.err = err
		} else if !r.Tombstone && r.ExpiresAt <= c.Meta.Now {
			s.err = fmt.Errorf("commit at %d wrote %+v, expired at FSM time %d and not cut down", c.Meta.Applied, r, c.Meta.Now)
		}
	}
	return s.Store.Commit(c)
}

// TestWrittenRecordsAreLiveOrCutDown applies random commands one to an
// entry, each its own commit: every record a command writes is live at
// that command's FSM time or cut down. (A batch or a group of entries may
// write a record live at its command's time and move FSM time past its
// TTL before the group commits; a read then answers as right after that
// command, storeRef says why.)
func TestWrittenRecordsAreLiveOrCutDown(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := &cmdGen{now: t0}
		s := &commitCheckStore{Store: NewMemStore()}
		m, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		var index uint64
		for range rapid.IntRange(1, 150).Draw(t, "steps") {
			index++
			// Not top level: no batch, so one command per commit.
			g.learn(m.Apply(index, g.command(t, false)))
			if s.err != nil {
				t.Fatal(s.err)
			}
		}
	})
}
