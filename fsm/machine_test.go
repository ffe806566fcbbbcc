package fsm

import (
	"bytes"
	"testing"
)

func TestBatchAppliesInOrderWithPositionTokens(t *testing.T) {
	h := newHarness(t)
	h.applyAll(tick(at(0)), tick(at(0))) // the batch is entry 3
	res := h.apply(batch(
		claim("k1", "o1", at(1)),
		claim("k2", "o2", at(2)),
		claim("k1", "o3", at(3)),                       // in progress: k1 is held by position 0
		complete("k1", TokenFor(3, 0), charged, at(4)), // sees position 0's claim
		claim("k1", "o3", at(5)),                       // replay of that completion
		release("k2", TokenFor(3, 1), at(6)),
		claim("k2", "o4", at(7)), // re-executes with its own position's token
		&Command{Type: TypeBatch, Now: at(8)},
		&Command{Type: TypeUnknown, Now: at(9)},
	))
	want := []struct {
		o     Outcome
		token uint64
	}{
		{OutcomeWon, TokenFor(3, 0)}, {OutcomeWon, TokenFor(3, 1)}, {OutcomeInProgress, TokenFor(3, 0)},
		{OutcomeOK, TokenFor(3, 0)}, {OutcomeCompleted, TokenFor(3, 0)}, {OutcomeOK, 0},
		{OutcomeWon, TokenFor(3, 6)}, {OutcomeUnknown, 0}, {OutcomeUnknown, 0},
	}
	if res.Outcome != OutcomeOK || len(res.Batch) != len(want) {
		t.Fatalf("batch result %v with %d results, want ok with %d", res.Outcome, len(res.Batch), len(want))
	}
	for i, w := range want {
		got := res.Batch[i]
		var token uint64
		if got.Record != nil {
			token = got.Record.Token
		}
		if got.Outcome != w.o || token != w.token {
			t.Errorf("position %d: %v token %d, want %v token %d", i, got.Outcome, token, w.o, w.token)
		}
	}
	// Each command's Now advanced FSM time in order; the ones that cannot be
	// applied changed nothing but time.
	if got := h.m.Now(); got != at(9) {
		t.Fatalf("FSM time %d after batch, want %d", got, at(9))
	}
	if r, _ := h.m.Get(rk("k2")); r.CreatedAt != at(7) || r.Owner != "o4" {
		t.Fatalf("k2 after batch: %+v", r)
	}
}

func TestTokensGrowAcrossEntriesAndPositions(t *testing.T) {
	if !(TokenFor(7, MaxBatch-1) < TokenFor(8, 0) && TokenFor(7, 0) < TokenFor(7, 1)) {
		t.Fatal("tokens do not grow with index and position")
	}
	h := newHarness(t)
	a := h.mustWin("k", "o1", at(0))
	res := h.apply(batch(tick(at(1)), claim("k", "o2", at(40))))
	if b := res.Batch[1]; b.Outcome != OutcomeWon || b.Record.Token <= a || b.Record.Token != TokenFor(2, 1) {
		t.Fatalf("takeover in batch: %+v, want token %d > %d", b.Record, TokenFor(2, 1), a)
	}
}

func getWatch(h *harness, key string) (*Record, <-chan struct{}) {
	r, _, ch := h.m.GetWatch(rk(key))
	return r, ch
}

// TestWatchers: a PENDING record's watch channel is closed by the next change
// of that key, whatever the change; completed and absent records are not watched.
func TestWatchers(t *testing.T) {
	changes := []struct {
		name string
		cmd  *Command
	}{
		{"complete", complete("k", tok(1), charged, at(1))},
		{"release", release("k", tok(1), at(1))},
		{"takeover", claim("k", "o2", at(31))},
		{"expire", expire(10, at(0)+defTTL)},
		{"claim after TTL", claimFP("k", "fp-B", "o2", at(0)+defTTL)},
		{"batch", batch(tick(at(1)), release("k", tok(1), at(2)))},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.mustWin("k", "o1", at(0))
			h.mustWin("other", "o1", at(0))
			r, ch := getWatch(h, "k")
			if r == nil || r.State != StatePending || ch == nil {
				t.Fatalf("GetWatch on pending: %+v, %v", r, ch)
			}
			if _, ch2 := getWatch(h, "k"); ch2 != ch {
				t.Fatal("two waiters on one key do not share a channel")
			}
			// Neither another key's change nor a fenced call wakes the waiter.
			h.want(h.apply(complete("other", tok(2), charged, at(0))), OutcomeOK)
			h.want(h.apply(complete("k", tok(9), charged, at(0))), OutcomeFenced)
			h.want(h.apply(claim("k", "o2", at(0))), OutcomeInProgress)
			if isClosed(ch) || h.m.Waiting() != 1 {
				t.Fatalf("woken by an unrelated command (waiting %d)", h.m.Waiting())
			}
			h.apply(c.cmd)
			if !isClosed(ch) || h.m.Waiting() != 0 {
				t.Fatalf("not woken by %s (waiting %d)", c.name, h.m.Waiting())
			}
		})
	}
}

func TestWatchNilForCompletedAndAbsent(t *testing.T) {
	h := newHarness(t)
	h.applyAll(completed...)
	if r, ch := getWatch(h, "k"); r == nil || r.State != StateCompleted || ch != nil {
		t.Fatalf("GetWatch on completed: %+v, %v; want the record and no channel", r, ch)
	}
	if r, _, ch := h.m.GetWatch(rk("absent")); r != nil || ch != nil {
		t.Fatalf("GetWatch on absent: %+v, %v", r, ch)
	}
	if h.m.Waiting() != 0 {
		t.Fatalf("%d keys watched, want 0", h.m.Waiting())
	}
}

func TestRestoreWakesEveryWaiter(t *testing.T) {
	h := newHarness(t)
	snap := snapshotBytes(t, h.m)
	h.mustWin("a", "o1", at(0))
	h.mustWin("b", "o1", at(0))
	_, cha := getWatch(h, "a")
	_, chb := getWatch(h, "b")
	if err := h.m.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !isClosed(cha) || !isClosed(chb) || h.m.Waiting() != 0 {
		t.Fatal("restore left waiters asleep")
	}
}

// TestDigestCatchesDivergence shows the determinism checker can fail: two
// logs that differ in one command's Now, or one record byte, give other digests.
func TestDigestCatchesDivergence(t *testing.T) {
	build := func(now int64, body string) *Machine {
		h := newHarness(t)
		h.mustWin("k", "o1", at(0))
		h.applyAll(complete("k", tok(1), resp(200, body), now))
		return h.m
	}
	a, b := build(at(1), "x"), build(at(1), "x")
	if a.Digest() != b.Digest() || !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("same log, different digests")
	}
	if a.Digest() == build(at(2), "x").Digest() {
		t.Fatal("digest ignores completed_at")
	}
	if a.Digest() == build(at(1), "y").Digest() {
		t.Fatal("digest ignores the response body")
	}
	b.Apply(9, tick(at(5)))
	if a.Digest() == b.Digest() {
		t.Fatal("digest ignores FSM time")
	}
}

func TestNamesOfEnums(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{StatePending.String(), "pending"}, {StateCompleted.String(), "completed"}, {State(9).String(), "unknown"},
		{OutcomeInProgress.String(), "in_progress"}, {OutcomeOK.String(), "ok"}, {Outcome(99).String(), "unknown"},
		{TypeBatch.String(), "batch"}, {typeEnd.String(), "unknown"},
	} {
		if c.got != c.want {
			t.Errorf("name %q, want %q", c.got, c.want)
		}
	}
}

func TestCountsFollowStates(t *testing.T) {
	m := NewMachine()
	m.Apply(1, claim("a", "o1", at(0)))
	m.Apply(2, claim("b", "o1", at(0)))
	if p, c := m.Counts(); p != 2 || c != 0 {
		t.Fatalf("after two claims: pending %d completed %d", p, c)
	}
	m.Apply(3, complete("a", TokenFor(1, 0), &Response{Status: 201}, at(1)))
	m.Apply(4, release("b", TokenFor(2, 0), at(1)))
	if p, c := m.Counts(); p != 0 || c != 1 {
		t.Fatalf("after complete and release: pending %d completed %d", p, c)
	}
	var buf bytes.Buffer
	if err := m.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r := NewMachine()
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if p, c := r.Counts(); p != 0 || c != 1 {
		t.Fatalf("after restore: pending %d completed %d", p, c)
	}
}
