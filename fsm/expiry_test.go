package fsm

import (
	"fmt"
	"testing"
)

// Lease takeover and TTL expiry are driven only by the commands' Now: these
// tests never touch a clock.

func TestFSMTimeNeverGoesBackwards(t *testing.T) {
	h := newHarness(t)
	h.mustWin("k", "o1", at(0))
	h.applyAll(tick(at(31))) // the lease of o1 ends at at(30)
	h.applyAll(tick(at(5)))  // a new leader whose clock lags
	if got := h.m.Now(); got != at(31) {
		t.Fatalf("FSM time %d, want %d", got, at(31))
	}
	// A claim stamped with an older Now does not see the lease as live again.
	res := h.apply(claim("k", "o2", at(10)))
	h.want(res, OutcomeWon)
	if res.Record.Attempt != 2 || res.Record.LeaseExpiresAt != at(31)+defLease {
		t.Fatalf("takeover %+v: lease must start at FSM time %d", res.Record, at(31))
	}
	// Nor does an older Now revive a record past its TTL.
	h.mustWin("x", "o1", at(32))
	h.applyAll(tick(at(32) + defTTL))
	if _, ok := h.m.Get(rk("x")); ok {
		t.Fatal("record past its TTL is live")
	}
	res = h.apply(claimFP("x", "fp-B", "o3", at(40)))
	h.want(res, OutcomeWon)
	if res.Record.Attempt != 1 || res.Record.CreatedAt != at(32)+defTTL {
		t.Fatalf("claim after TTL: %+v, want a new record created at FSM time", res.Record)
	}
}

func TestPastTTLRecordIsAbsentBeforeExpire(t *testing.T) {
	h := newHarness(t)
	h.applyAll(shortTTL...) // expires at at(60)
	h.want(h.apply(complete("k", tok(1), charged, at(1))), OutcomeOK)
	h.applyAll(tick(at(59)))
	if _, ok := h.m.Get(rk("k")); !ok {
		t.Fatal("record absent before its TTL")
	}
	h.applyAll(tick(at(60))) // expires_at <= now: gone for reads and commands
	if _, ok := h.m.Get(rk("k")); ok {
		t.Fatal("Get returns a record whose TTL has passed")
	}
	if r, ch := getWatch(h, "k"); r != nil || ch != nil {
		t.Fatalf("GetWatch returns %+v, %v for an expired record", r, ch)
	}
	if h.m.Len() != 1 {
		t.Fatalf("Len %d: Expire has not run, the record is still stored", h.m.Len())
	}
	// Another request may now use the key: no mismatch, no replay.
	res := h.apply(claimFP("k", "fp-B", "o2", at(60)))
	h.want(res, OutcomeWon)
	if res.Record.Attempt != 1 || res.Record.Token <= tok(2) {
		t.Fatalf("claim after TTL: %+v", res.Record)
	}
	if h.m.Len() != 1 {
		t.Fatalf("Len %d after the key was reused, want 1", h.m.Len())
	}
}

func TestExpireDeletesDueRecordsInOrder(t *testing.T) {
	h := newHarness(t)
	// Expiry times (seconds after at(0)); ties on purpose, inserted out of
	// key order so only the (ExpiresAt, key) order can explain the result.
	ttls := map[string]int64{"e": 60, "b": 60, "d": 70, "a": 80, "c": 60, "f": 200}
	for _, k := range []string{"f", "a", "e", "c", "d", "b"} {
		h.applyAll(claimWith(k, defFP, "o", 10*sec, ttls[k]*sec, at(0)))
	}
	if next, ok := h.m.NextExpiry(); !ok || next != at(60) {
		t.Fatalf("NextExpiry %d %v, want %d", next, ok, at(60))
	}
	h.applyAll(tick(at(100))) // everything but f is past its TTL now
	steps := []struct {
		limit   uint32
		now     int64
		deleted []string
	}{
		{limit: 0, now: at(100)},
		{limit: 2, now: at(100), deleted: []string{"b", "c"}},
		{limit: 1, now: at(100), deleted: []string{"e"}},
		// A stale Now does not stop records due at FSM time.
		{limit: 5, now: at(10), deleted: []string{"d", "a"}},
		{limit: 5, now: at(199)},
		{limit: 5, now: at(200), deleted: []string{"f"}}, // expires_at <= now
		{limit: 5, now: at(300)},
	}
	left := []string{"a", "b", "c", "d", "e", "f"}
	for i, st := range steps {
		res := h.apply(expire(st.limit, st.now))
		if res.Outcome != OutcomeOK || res.Expired != len(st.deleted) || res.Record != nil {
			t.Fatalf("step %d: %+v, want ok deleting %v", i, res, st.deleted)
		}
		left = without(left, st.deleted)
		for _, k := range st.deleted {
			if _, ok := h.stored(k); ok {
				t.Fatalf("step %d: %q still stored", i, k)
			}
		}
		for _, k := range left {
			if _, ok := h.stored(k); !ok {
				t.Fatalf("step %d: %q deleted out of order", i, k)
			}
		}
	}
	if _, ok := h.m.NextExpiry(); ok || h.m.Len() != 0 {
		t.Fatalf("state not empty: len %d", h.m.Len())
	}
}

func without(keys, drop []string) []string {
	var out []string
	for _, k := range keys {
		keep := true
		for _, d := range drop {
			keep = keep && k != d
		}
		if keep {
			out = append(out, k)
		}
	}
	return out
}

// TestExpireFollowsRenewedExpiry: a record whose expires_at moved (extend,
// takeover) is indexed under its new time, not its old one.
func TestExpireFollowsRenewedExpiry(t *testing.T) {
	h := newHarness(t)
	h.applyAll(shortTTL...) // expires at at(60)
	h.want(h.apply(extend("k", tok(1), 300*sec, at(1))), OutcomeOK)
	h.want(h.apply(expire(10, at(100))), OutcomeOK)
	if _, ok := h.m.Get(rk("k")); !ok {
		t.Fatal("extended record expired at its old time")
	}
	if next, _ := h.m.NextExpiry(); next != at(301) {
		t.Fatalf("NextExpiry %d, want %d", next, at(301))
	}
	if res := h.apply(expire(10, at(301))); res.Expired != 1 {
		t.Fatalf("expired %d at the new time, want 1", res.Expired)
	}
}

// TestExpireIsBounded: a backlog is drained limit by limit, never more.
func TestExpireIsBounded(t *testing.T) {
	h := newHarness(t)
	for i := range 250 {
		h.applyAll(claimWith(fmt.Sprintf("k%03d", i), defFP, "o", 10*sec, 60*sec, at(int64(i%7))))
	}
	left := 250
	for i, want := range []int{100, 100, 50, 0} {
		res := h.apply(expire(100, at(1000)))
		left -= want
		if res.Expired != want || h.m.Len() != left {
			t.Fatalf("round %d: expired %d leaving %d, want %d leaving %d", i, res.Expired, h.m.Len(), want, left)
		}
	}
}

// getCounter counts the records read from its store one by one.
type getCounter struct {
	Store
	gets int
}

func (c *getCounter) Get(key []byte) ([]byte, bool, error) {
	c.gets++
	return c.Store.Get(key)
}

// TestExpireReadsEachDueRecordOnce: Expire acts on the records Due read,
// without a second read of each from the store: for a claim left to its
// lease's end, a read of the disk.
func TestExpireReadsEachDueRecordOnce(t *testing.T) {
	store := &getCounter{Store: NewMemStore()}
	m, err := New(store)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, m: m}
	const claims = 20
	for i := range claims {
		h.mustWin(fmt.Sprintf("k%d", i), "o1", at(0))
	}
	h.mustWin("unwatched", "o1", at(0))
	for i := range claims {
		h.applyAll(watched(fmt.Sprintf("w%d", i), "o1", defLease, defTTL, at(0)))
	}
	store.gets = 0
	res := h.apply(expire(1000, at(0)+defLease))
	if res.Abandoned != claims {
		t.Fatalf("Expire marked %d claims abandoned, want %d", res.Abandoned, claims)
	}
	if store.gets != 0 {
		t.Fatalf("Expire read %d records one by one besides Due, want none", store.gets)
	}
	res = h.apply(expire(1000, at(0)+defTTL))
	if res.Expired != 2*claims+1 || store.gets != 0 {
		t.Fatalf("Expire at the TTL deleted %d records and read %d one by one, want %d and none", res.Expired, store.gets, 2*claims+1)
	}
}
