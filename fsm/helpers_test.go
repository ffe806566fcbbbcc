package fsm

import (
	"bytes"
	"time"
)

// Shared helpers of the fsm tests: command builders with the defaults of
// docs/API.md (lease 30 s, TTL 24 h) and a harness that numbers log entries.

const (
	sec        = int64(time.Second)
	defLease   = 30 * sec
	defTTL     = 24 * int64(time.Hour)
	defFP      = "fp-A"
	testTenant = "acme"
	testScope  = "POST /v1/charges"
)

// t0 is an arbitrary FSM time origin (Unix nanoseconds).
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// at returns FSM time t0 plus s seconds.
func at(s int64) int64 { return t0 + s*sec }

func rk(key string) RecordKey { return RecordKey{Tenant: testTenant, Scope: testScope, Key: key} }

// tok is the token a single command at log index i holds.
func tok(i uint64) uint64 { return TokenFor(i, 0) }

func claim(key, owner string, now int64) *Command {
	return claimWith(key, defFP, owner, defLease, defTTL, now)
}

func claimFP(key, fp, owner string, now int64) *Command {
	return claimWith(key, fp, owner, defLease, defTTL, now)
}

func claimWith(key, fp, owner string, lease, ttl, now int64) *Command {
	return &Command{Type: TypeClaim, Now: now, Key: rk(key), Fingerprint: []byte(fp),
		Owner: owner, Lease: lease, TTL: ttl}
}

func complete(key string, token uint64, r *Response, now int64) *Command {
	return &Command{Type: TypeComplete, Now: now, Key: rk(key), Token: token, Response: r}
}

func release(key string, token uint64, now int64) *Command {
	return &Command{Type: TypeRelease, Now: now, Key: rk(key), Token: token}
}

func extend(key string, token uint64, lease, now int64) *Command {
	return &Command{Type: TypeExtend, Now: now, Key: rk(key), Token: token, Lease: lease}
}

func checkpoint(key string, token uint64, point, data string, now int64) *Command {
	return &Command{Type: TypeCheckpoint, Now: now, Key: rk(key), Token: token,
		Checkpoint: &Checkpoint{Point: point, Data: []byte(data)}}
}

// watched is a claim that reports its record's abandonment.
func watched(key, owner string, lease, ttl, now int64) *Command {
	c := claimWith(key, defFP, owner, lease, ttl, now)
	c.WatchAbandon = true
	return c
}

func expire(limit uint32, now int64) *Command {
	return &Command{Type: TypeExpire, Now: now, Limit: limit}
}

// tick only advances FSM time: an Expire that may delete nothing.
func tick(now int64) *Command { return expire(0, now) }

func batch(cs ...*Command) *Command { return &Command{Type: TypeBatch, Batch: cs} }

func resp(status int32, body string) *Response {
	return &Response{Status: status, Headers: []Header{{"Content-Type", "application/json"}}, Body: []byte(body)}
}

// tb is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// harness applies commands at increasing log indexes 1, 2, 3…
type harness struct {
	t     tb
	m     *Machine
	index uint64
}

func newHarness(t tb) *harness { return &harness{t: t, m: NewMachine()} }

// NewMachine returns a Machine over a fresh in-memory reference store.
func NewMachine() *Machine {
	m, err := New(NewMemStore())
	if err != nil {
		panic(err)
	}
	return m
}

// stored returns the record under k in m's store even if its TTL has passed.
func stored(m *Machine, k RecordKey) (*Record, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r := mustRecord(m.cur.Get(EncodeKey(k)))
	return r, r != nil
}

func (h *harness) apply(c *Command) Result {
	h.index++
	return h.m.Apply(h.index, c)
}

// applyAll applies cs and fails the test if one is answered OutcomeUnknown.
func (h *harness) applyAll(cs ...*Command) {
	h.t.Helper()
	for _, c := range cs {
		if res := h.apply(c); res.Outcome == OutcomeUnknown {
			h.t.Fatalf("apply %v at %d: outcome unknown", c.Type, h.index)
		}
	}
}

// mustWin claims key for owner and returns the token won.
func (h *harness) mustWin(key, owner string, now int64) uint64 {
	h.t.Helper()
	res := h.apply(claim(key, owner, now))
	if res.Outcome != OutcomeWon {
		h.t.Fatalf("claim %q by %q: got %v, want won", key, owner, res.Outcome)
	}
	return res.Record.Token
}

// want checks the outcome of res.
func (h *harness) want(res Result, o Outcome) {
	h.t.Helper()
	if res.Outcome != o {
		h.t.Fatalf("outcome %v, want %v (record %+v)", res.Outcome, o, res.Record)
	}
}

// stored returns the record under key even if its TTL has passed.
func (h *harness) stored(key string) (*Record, bool) { return stored(h.m, rk(key)) }

func snapshotBytes(t tb, m *Machine) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := m.WriteSnapshot(&buf); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	return buf.Bytes()
}

func restored(t tb, snap []byte) *Machine {
	t.Helper()
	m := NewMachine()
	if err := m.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return m
}

// recordBytes is the canonical encoding of r (nil encodes as empty), used to
// compare records without caring for nil versus empty slices.
func recordBytes(r *Record) []byte {
	if r == nil {
		return nil
	}
	var e encoder
	e.record(r)
	return e.buf
}

// sameResult reports whether two results are equal up to nil/empty slices.
func sameResult(a, b Result) bool {
	if a.Outcome != b.Outcome || a.Expired != b.Expired || a.Abandoned != b.Abandoned || len(a.Batch) != len(b.Batch) ||
		(a.Record == nil) != (b.Record == nil) || !bytes.Equal(recordBytes(a.Record), recordBytes(b.Record)) {
		return false
	}
	for i := range a.Batch {
		if !sameResult(a.Batch[i], b.Batch[i]) {
			return false
		}
	}
	return true
}

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
