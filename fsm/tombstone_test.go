package fsm

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// tombTTL is the tombstone time the tests stamp: a day after the TTL.
const tombTTL = defTTL

// withTombstone stamps d into c, as a leader with --tombstone-ttl does.
func withTombstone(c *Command, d int64) *Command {
	c.Tombstone = d
	return c
}

// tombstoned are the setups whose record has a tombstone time: a short TTL
// (it expires at at(60)), claimed, and completed or not.
var (
	pendingTomb   = []*Command{withTombstone(claimWith("k", defFP, "o1", defLease, 60*sec, at(0)), tombTTL)}
	completedTomb = []*Command{pendingTomb[0], withTombstone(complete("k", tok(1), charged, at(1)), tombTTL)}
)

// TestTombstoneOutcomes: from expires_at until the tombstone ends, a key
// that completed or expired PENDING answers EXPIRED (MISMATCH to another
// fingerprint), whether or not Expire has cut it down yet; after that, and
// without a tombstone time, the key is free.
func TestTombstoneOutcomes(t *testing.T) {
	for _, cut := range []bool{false, true} {
		for _, tc := range []struct {
			name  string
			setup []*Command
			cmd   *Command
			want  Outcome
		}{
			{"claim of the same request after a completion", completedTomb, claim("k", "o2", at(61)), OutcomeExpired},
			{"claim of the same request after it expired pending", pendingTomb, claim("k", "o2", at(61)), OutcomeExpired},
			{"claim of another request", completedTomb, claimFP("k", "fp-B", "o2", at(61)), OutcomeMismatch},
			{"complete", pendingTomb, complete("k", tok(1), charged, at(61)), OutcomeExpired},
			{"release", pendingTomb, release("k", tok(1), at(61)), OutcomeExpired},
			{"extend", pendingTomb, extend("k", tok(1), 60*sec, at(61)), OutcomeExpired},
			{"checkpoint", pendingTomb, checkpoint("k", tok(1), "charged", "", at(61)), OutcomeExpired},
			{"claim at the end of the tombstone", completedTomb, claimFP("k", "fp-B", "o2", at(60)+tombTTL), OutcomeWon},
			{"claim at expires_at exactly", completedTomb, claim("k", "o2", at(60)), OutcomeExpired},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t)
				h.applyAll(tc.setup...)
				if cut {
					h.applyAll(expire(10, at(60))) // cut down to the tombstone
				}
				res := h.apply(tc.cmd)
				if res.Outcome != tc.want {
					t.Fatalf("cut %v: outcome %v, want %v", cut, res.Outcome, tc.want)
				}
				if res.Outcome == OutcomeExpired && tc.cmd.Type == TypeClaim {
					if r := res.Record; r == nil || r.Response != nil || r.Owner != "" || r.ExpiresAt != at(60) {
						t.Fatalf("EXPIRED claim reveals %+v, want the tombstone (expires_at, no response)", r)
					}
				}
			})
		}
	}
}

// TestTombstoneStartsAtExpiresAt: the moment before, the record replays.
func TestTombstoneStartsAtExpiresAt(t *testing.T) {
	h := newHarness(t)
	h.applyAll(completedTomb...)
	h.want(h.apply(claim("k", "o2", at(59))), OutcomeCompleted)
	h.want(h.apply(claim("k", "o2", at(60))), OutcomeExpired)
}

// TestTombstoneLifecycle: Expire cuts a completed record down to its
// tombstone at expires_at (bytes kept: key and fingerprint; no key in the
// quota), deletes it when the tombstone ends, and a released record leaves
// none.
func TestTombstoneLifecycle(t *testing.T) {
	h := newHarness(t)
	h.applyAll(completedTomb...)
	h.applyAll(withTombstone(claim("r", "o1", at(2)), tombTTL), release("r", TokenFor(3, 0), at(3)))
	h.applyAll(expire(10, at(60)))
	r, ok := h.stored("k")
	if !ok || !r.Tombstone || r.Response != nil || r.State != StateCompleted || r.CompletedAt != at(1) {
		t.Fatalf("after Expire at expires_at: %+v, want a completed tombstone", r)
	}
	if u := h.m.Usage(testTenant); u.Keys != 0 || u.Bytes != recordSize(r) {
		t.Fatalf("usage %+v, want no key and the tombstone's %d bytes", u, recordSize(r))
	}
	if ts, ok := h.m.Tombstone(rk("k")); !ok || ts.CompletedAt != at(1) {
		t.Fatalf("Tombstone(k) = %+v %v", ts, ok)
	}
	if _, ok := h.m.Get(rk("k")); ok {
		t.Fatal("a tombstone is live for Get")
	}
	if _, ok := h.stored("r"); ok {
		t.Fatal("a released record left something")
	}
	h.applyAll(expire(10, at(60)+tombTTL-1))
	if _, ok := h.stored("k"); !ok {
		t.Fatal("tombstone deleted before its end")
	}
	h.applyAll(expire(10, at(60)+tombTTL))
	if _, ok := h.stored("k"); ok || h.m.Len() != 0 {
		t.Fatalf("tombstone still stored at its end (len %d)", h.m.Len())
	}
	if u := h.m.Usage(testTenant); u != (Usage{}) {
		t.Fatalf("usage %+v after the tombstone ended", u)
	}
}

// TestTombstoneLateExpireDeletesAtOnce: an Expire that runs after the
// tombstone would have ended deletes the record without cutting it first.
func TestTombstoneLateExpireDeletesAtOnce(t *testing.T) {
	h := newHarness(t)
	h.applyAll(completedTomb...)
	h.applyAll(expire(10, at(60)+tombTTL+sec))
	if h.m.Len() != 0 {
		t.Fatalf("%d records left", h.m.Len())
	}
}

// TestTombstoneTimeFollowsTheLastStamp: a completion stamped by a leader
// with another --tombstone-ttl (or none) decides the record's tombstone.
func TestTombstoneTimeFollowsTheLastStamp(t *testing.T) {
	h := newHarness(t)
	h.applyAll(pendingTomb[0], complete("k", tok(1), charged, at(1))) // the new leader has none
	if r, _ := h.stored("k"); r.TombstoneFor != 0 {
		t.Fatalf("tombstone time %d after a completion without one", r.TombstoneFor)
	}
	h.want(h.apply(claim("k", "o2", at(61))), OutcomeWon)
}

// Golden encodings written by the release before recovery points and
// tombstones (commit 3ed1c75): records and commands without the new
// fields must encode byte for byte as they did, or stores, snapshots,
// digests and logs of that release would read differently.
const (
	goldenDone     = "0461636d6510504f5354202f76312f63686172676573016b020466702d41026f3180800401008080b885d89fb496308080b09aeac4db963080a88ebfdf9fb49630019203010c436f6e74656e742d54797065106170706c69636174696f6e2f6a736f6e0d7b226964223a2263685f31227d"
	goldenClaim    = "02818080b885d89fb496300461636d6510504f5354202f76312f63686172676573016b0466702d41026f3180b09dc2df018080f89492a527030043b9394e"
	goldenComplete = "020280a88ebfdf9fb496300461636d6510504f5354202f76312f63686172676573016b808004019203010c436f6e74656e742d54797065106170706c69636174696f6e2f6a736f6e0d7b226964223a2263685f31227d11e89c87"
)

// TestEncodingsWithoutNewFieldsAreUnchanged compares with the golden bytes.
func TestEncodingsWithoutNewFieldsAreUnchanged(t *testing.T) {
	for name, tc := range map[string]struct {
		got  []byte
		want string
	}{
		"completed record": {EncodeRecord(done()), goldenDone},
		"claim with quota": {EncodeCommand(withQuota(claim("k", "o1", at(0)), Quota{Keys: 3})), goldenClaim},
		"complete":         {EncodeCommand(complete("k", tok(1), charged, at(1))), goldenComplete},
	} {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s encodes as\n%s\nwant\n%s", name, got, tc.want)
		}
	}
}

// TestTombstoneRecordsRoundTrip: the encoding keeps a tombstone time and
// a cut tombstone.
func TestTombstoneRecordsRoundTrip(t *testing.T) {
	for _, r := range []*Record{
		rec(func(r *Record) { r.TombstoneFor = tombTTL }),
		tombstoneOf(rec(func(r *Record) { r.TombstoneFor = tombTTL })),
	} {
		got, err := DecodeRecord(EncodeRecord(r))
		if err != nil || !bytes.Equal(EncodeRecord(got), EncodeRecord(r)) || got.TombstoneFor != r.TombstoneFor || got.Tombstone != r.Tombstone {
			t.Fatalf("round trip of %+v: %+v %v", r, got, err)
		}
	}
	c := withTombstone(withQuota(claim("k", "o1", at(0)), Quota{Keys: 3}), tombTTL)
	got, err := DecodeCommand(EncodeCommand(c))
	if err != nil || got.Tombstone != tombTTL || got.Quota != c.Quota {
		t.Fatalf("command round trip: %+v %v", got, err)
	}
	if LevelOf(c) != 2 || LevelOf(claim("k", "o1", at(0))) != BaseLevel {
		t.Fatal("a tombstone time must need level 2, a plain claim the base level")
	}
}
