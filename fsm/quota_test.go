package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// withQuota stamps q into c, as the proposing leader does.
func withQuota(c *Command, q Quota) *Command {
	c.Quota = q
	return c
}

func otherTenant(c *Command) *Command {
	c.Key.Tenant = "globex"
	return c
}

// Sizes of the records the table builds (see recordSize).
var (
	baseSize = recordSize(base())  // a PENDING claim of "k" by o1
	doneSize = recordSize(done())  // base completed with charged
	respSize = doneSize - baseSize // what completing with charged adds
	keyQuota = func(n uint64) Quota { return Quota{Keys: n} }
)

func TestRecordSizeCountsEveryVariableByte(t *testing.T) {
	// acme + "POST /v1/charges" + k + fp-A + o1, then the body and one header.
	if want := uint64(4 + 16 + 1 + 4 + 2); baseSize != want {
		t.Fatalf("pending record size %d, want %d", baseSize, want)
	}
	if want := uint64(len(`{"id":"ch_1"}`) + len("Content-Type") + len("application/json")); respSize != want {
		t.Fatalf("response adds %d bytes, want %d", respSize, want)
	}
}

type quotaCase struct {
	name     string
	setup    []*Command // applied at indexes 1..len(setup), each must not be unknown
	cmd      *Command
	want     Outcome
	exceeded QuotaKind
	usage    Usage // acme's usage afterwards
}

// quotaCases: one case per way a quota admits or refuses, plus what must
// never be refused (growth-free commands, other tenants, unlimited quotas).
var quotaCases = []quotaCase{
	{name: "claim/no quota is unlimited", setup: []*Command{claim("a", "o1", at(0))},
		cmd: claim("k", "o1", at(1)), want: OutcomeWon, usage: Usage{2, 2 * baseSize}},
	{name: "claim/under the key quota wins", setup: []*Command{claim("a", "o1", at(0))},
		cmd: withQuota(claim("k", "o1", at(1)), keyQuota(2)), want: OutcomeWon, usage: Usage{2, 2 * baseSize}},
	{name: "claim/new key at the key quota is refused", setup: []*Command{claim("a", "o1", at(0)), claim("b", "o1", at(0))},
		cmd: withQuota(claim("k", "o1", at(1)), keyQuota(2)), want: OutcomeQuotaExceeded, exceeded: QuotaKeys,
		usage: Usage{2, 2 * baseSize}},
	{name: "claim/retry by the holder at the key quota wins", setup: claimed,
		cmd: withQuota(claim("k", "o1", at(1)), keyQuota(1)), want: OutcomeWon, usage: Usage{1, baseSize}},
	{name: "claim/in progress at the key quota", setup: claimed,
		cmd: withQuota(claim("k", "o2", at(1)), keyQuota(1)), want: OutcomeInProgress, usage: Usage{1, baseSize}},
	{name: "claim/takeover at the key quota wins", setup: claimed,
		cmd: withQuota(claim("k", "o2", at(31)), keyQuota(1)), want: OutcomeWon, usage: Usage{1, baseSize}},
	{name: "claim/replay at the key quota", setup: completed,
		cmd: withQuota(claim("k", "o2", at(2)), keyQuota(1)), want: OutcomeCompleted, usage: Usage{1, doneSize}},
	{name: "claim/replacing an expired record adds no key", setup: shortTTL,
		cmd: withQuota(claim("k", "o2", at(60)), keyQuota(1)), want: OutcomeWon, usage: Usage{1, baseSize}},
	{name: "claim/expired records count until Expire deletes them", setup: shortTTL,
		cmd: withQuota(claim("a", "o2", at(60)), keyQuota(1)), want: OutcomeQuotaExceeded, exceeded: QuotaKeys,
		usage: Usage{1, baseSize}},
	{name: "claim/after Expire the key is free", setup: []*Command{shortTTL[0], expire(10, at(60))},
		cmd: withQuota(claim("a", "o2", at(61)), keyQuota(1)), want: OutcomeWon, usage: Usage{1, baseSize}},
	{name: "claim/after release the key is free", setup: []*Command{claim("a", "o1", at(0)), release("a", tok(1), at(1))},
		cmd: withQuota(claim("k", "o1", at(2)), keyQuota(1)), want: OutcomeWon, usage: Usage{1, baseSize}},
	{name: "claim/another tenant at its quota does not count", setup: []*Command{otherTenant(claim("a", "o1", at(0)))},
		cmd: withQuota(claim("k", "o1", at(1)), keyQuota(1)), want: OutcomeWon, usage: Usage{1, baseSize}},
	{name: "claim/bigger than the byte quota is refused", cmd: withQuota(claim("k", "o1", at(0)), Quota{Bytes: baseSize - 1}),
		want: OutcomeQuotaExceeded, exceeded: QuotaBytes},
	{name: "claim/exactly the byte quota wins", cmd: withQuota(claim("k", "o1", at(0)), Quota{Bytes: baseSize}),
		want: OutcomeWon, usage: Usage{1, baseSize}},
	{name: "claim/both quotas, bytes hit first", setup: []*Command{claim("a", "o1", at(0))},
		cmd: withQuota(claim("k", "o1", at(1)), Quota{Keys: 5, Bytes: 2*baseSize - 1}), want: OutcomeQuotaExceeded,
		exceeded: QuotaBytes, usage: Usage{1, baseSize}},

	{name: "complete/within the byte quota", setup: claimed,
		cmd: withQuota(complete("k", tok(1), charged, at(1)), Quota{Bytes: doneSize}), want: OutcomeOK, usage: Usage{1, doneSize}},
	{name: "complete/over the byte quota is refused and stays pending", setup: claimed,
		cmd: withQuota(complete("k", tok(1), charged, at(1)), Quota{Bytes: doneSize - 1}), want: OutcomeQuotaExceeded,
		exceeded: QuotaBytes, usage: Usage{1, baseSize}},
	{name: "complete/the key quota never refuses a completion", setup: []*Command{claim("k", "o1", at(0)), claim("a", "o1", at(0))},
		cmd: withQuota(complete("k", tok(1), charged, at(1)), keyQuota(1)), want: OutcomeOK, usage: Usage{2, doneSize + baseSize}},
	{name: "complete/an identical retry over a lowered quota is ok", setup: completed,
		cmd: withQuota(complete("k", tok(1), charged, at(2)), Quota{Bytes: 1}), want: OutcomeOK, usage: Usage{1, doneSize}},
	{name: "complete/fencing comes before the quota", setup: claimed,
		cmd: withQuota(complete("k", tok(9), charged, at(1)), Quota{Bytes: 1}), want: OutcomeFenced, usage: Usage{1, baseSize}},
	{name: "complete/an empty response fits any quota it already fits", setup: claimed,
		cmd: withQuota(complete("k", tok(1), nil, at(1)), Quota{Bytes: baseSize}), want: OutcomeOK, usage: Usage{1, baseSize}},

	// "charged" (7 bytes) and "ch_1" (4) add 11 bytes to the record.
	{name: "checkpoint/its name and data count toward the byte quota", setup: claimed,
		cmd: withQuota(checkpoint("k", tok(1), "charged", "ch_1", at(1)), Quota{Bytes: baseSize + 11}), want: OutcomeOK,
		usage: Usage{1, baseSize + 11}},
	{name: "checkpoint/over the byte quota is refused and keeps the previous point", setup: chargedStep,
		cmd:  withQuota(checkpoint("k", tok(1), "receipt-sent", "rcpt", at(1)), Quota{Bytes: baseSize + 11}),
		want: OutcomeQuotaExceeded, exceeded: QuotaBytes, usage: Usage{1, baseSize + 11}},
	{name: "checkpoint/a smaller point fits a lowered quota", setup: chargedStep,
		cmd: withQuota(checkpoint("k", tok(1), "done", "", at(1)), Quota{Bytes: baseSize + 4}), want: OutcomeOK,
		usage: Usage{1, baseSize + 4}},
	{name: "checkpoint/completion gives the point's bytes back", setup: chargedStep,
		cmd: complete("k", tok(1), charged, at(1)), want: OutcomeOK, usage: Usage{1, doneSize}},
}

func TestQuotaOutcomes(t *testing.T) {
	for _, tc := range quotaCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.applyAll(tc.setup...)
			before := recordsDump(h.m)
			res := h.apply(tc.cmd)
			if res.Outcome != tc.want || res.Exceeded != tc.exceeded {
				t.Fatalf("outcome %v (exceeded %v), want %v (%v)", res.Outcome, res.Exceeded, tc.want, tc.exceeded)
			}
			if got := h.m.Usage(testTenant); got != tc.usage {
				t.Fatalf("usage %+v, want %+v", got, tc.usage)
			}
			if res.Outcome == OutcomeQuotaExceeded {
				if res.Record != nil {
					t.Fatalf("a refusal reveals record %+v", res.Record)
				}
				if !bytes.Equal(before, recordsDump(h.m)) {
					t.Fatal("a refused command changed the state")
				}
			}
			if err := recountAgrees(h.m); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestQuotaRefusalLeavesHolderInCharge: a completion refused for its size
// keeps the record PENDING under the same token, so the holder can release
// it (the next claim re-executes) or complete with a smaller response.
func TestQuotaRefusalLeavesHolderInCharge(t *testing.T) {
	h := newHarness(t)
	q := Quota{Keys: 1, Bytes: baseSize + 10}
	token := h.mustWin("k", "o1", at(0))
	h.want(h.apply(withQuota(complete("k", token, charged, at(1)), q)), OutcomeQuotaExceeded)
	r, ok := h.m.Get(rk("k"))
	if !ok || r.State != StatePending || r.Token != token {
		t.Fatalf("record after refusal %+v, want PENDING with token %d", r, token)
	}
	h.want(h.apply(withQuota(complete("k", token, resp(204, ""), at(2)), Quota{Bytes: doneSize})), OutcomeOK)
	h.want(h.apply(release("k", token, at(3))), OutcomeFenced) // completed now
	if err := recountAgrees(h.m); err != nil {
		t.Fatal(err)
	}
}

// storedRecords is every stored record, in key order.
func storedRecords(m *Machine) []*Record {
	v, err := m.View()
	if err != nil {
		panic(err)
	}
	defer v.Close()
	var out []*Record
	v.Records(func(enc []byte) error {
		out = append(out, mustRecord(enc, true, nil))
		return nil
	})
	return out
}

// recordsDump is every stored record's encoding, in key order.
func recordsDump(m *Machine) []byte {
	var out []byte
	for _, r := range storedRecords(m) {
		out = append(out, recordBytes(r)...)
	}
	return out
}

// recount walks the records and counts each tenant's usage afresh.
func recount(m *Machine) map[string]Usage {
	out := map[string]Usage{}
	for _, r := range storedRecords(m) {
		u := out[r.Tenant]
		if !r.Tombstone { // a tombstone costs bytes, not a key
			u.Keys++
		}
		u.Bytes += recordSize(r)
		out[r.Tenant] = u
	}
	return out
}

// recountAgrees reports whether the machine's counters, and the store's,
// equal a recount.
func recountAgrees(m *Machine) error {
	want := recount(m)
	stored, err := m.Store().Usages()
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(m.usage, want) || !reflect.DeepEqual(stored, want) {
		return fmt.Errorf("usage counters %+v, in the store %+v, recount %+v", m.usage, stored, want)
	}
	return nil
}

func TestRecountCatchesDrift(t *testing.T) {
	h := newHarness(t)
	h.mustWin("k", "o1", at(0))
	h.m.usage[testTenant] = Usage{Keys: 1, Bytes: baseSize + 1}
	if recountAgrees(h.m) == nil {
		t.Fatal("a drifted byte counter was not caught")
	}
}

// quotaGen draws the quotas the property test stamps: mostly tight enough to
// refuse now and then over propKeys, sometimes none.
func quotaGen(t *rapid.T) Quota {
	return Quota{
		Keys:  rapid.SampledFrom([]uint64{0, 1, 2, 3}).Draw(t, "quotaKeys"),
		Bytes: rapid.SampledFrom([]uint64{0, 20, 40, 60, 200}).Draw(t, "quotaBytes"),
	}
}

func stampQuotas(t *rapid.T, c *Command) {
	if c.Type == TypeClaim || c.Type == TypeComplete {
		c.Quota = quotaGen(t)
	}
	for _, sub := range c.Batch {
		stampQuotas(t, sub)
	}
}

// TestPropertyUsageMatchesRecount: after every command of a random log with
// random quotas, each tenant's counters equal a recount of its records, on
// a machine fed directly and on one fed through the codec and restored from
// a snapshot halfway; both give the same results and digests, and a
// restored machine recounts the same usage.
func TestPropertyUsageMatchesRecount(t *testing.T) {
	refusals := 0 // over all runs: the quotas drawn must really refuse
	defer func() {
		if refusals == 0 && !t.Failed() {
			t.Error("no command was ever refused for a quota: the test exercises nothing")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		g := &cmdGen{now: t0}
		a, b := NewMachine(), NewMachine()
		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		snapAt := rapid.IntRange(0, steps).Draw(t, "snapAt")
		for i := range steps {
			if i == snapAt {
				b = restored(t, snapshotBytes(t, b))
			}
			c := g.command(t, true)
			stampQuotas(t, c)
			ra := a.Apply(uint64(i+1), c)
			rb := b.Apply(uint64(i+1), decoded(t, c))
			if !sameResult(ra, rb) || ra.Exceeded != rb.Exceeded {
				t.Fatalf("step %d (%v): results differ\n a %+v\n b %+v", i, c.Type, ra, rb)
			}
			for _, m := range []*Machine{a, b} {
				if err := recountAgrees(m); err != nil {
					t.Fatalf("step %d (%v): %v", i, c.Type, err)
				}
			}
			if ra.Outcome == OutcomeQuotaExceeded {
				refusals++
			}
			g.learn(ra)
		}
		if a.Digest() != b.Digest() {
			t.Fatal("digests differ")
		}
		if err := recountAgrees(restored(t, snapshotBytes(t, a))); err != nil {
			t.Fatalf("after restore: %v", err)
		}
	})
}

func TestQuotaCodec(t *testing.T) {
	plain := claim("k", "o1", at(0))
	before := EncodeCommand(plain)
	if before[1]&quotaFlag != 0 {
		t.Fatal("a command without a quota carries the flag")
	}
	for _, c := range []*Command{
		withQuota(claim("k", "o1", at(0)), Quota{Keys: 7}),
		withQuota(complete("k", tok(3), charged, at(1)), Quota{Bytes: 1 << 40}),
		batch(withQuota(claim("k", "o1", at(0)), Quota{Keys: 1, Bytes: 2}), release("k", tok(1), at(0))),
	} {
		got, err := DecodeCommand(EncodeCommand(c))
		if err != nil {
			t.Fatalf("decode %v: %v", c.Type, err)
		}
		if !reflect.DeepEqual(normalise(got), normalise(c)) {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, c)
		}
	}
	// The flag on a type that takes no quota, or with an empty quota, is
	// something no encoder writes.
	// Both carry a valid checksum, so the decoder's own checks refuse them.
	rel := encodedBody(release("k", tok(1), at(0)))
	rel[0] |= quotaFlag
	zero := encodedBody(plain)
	zero[0] |= quotaFlag
	for name, b := range map[string][]byte{"flagged release": sealed(append(rel, 1, 1)...), "flagged zero quota": sealed(append(zero, 0, 0)...)} {
		if _, err := DecodeCommand(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}
