package fsm

import (
	"bytes"
	"testing"
)

// base is the record a claim of "k" by o1 at at(0) creates at log index 1;
// the table's expected records are edits of it.
func base() *Record {
	return &Record{
		RecordKey: rk("k"), State: StatePending, Fingerprint: []byte(defFP), Owner: "o1",
		Token: tok(1), Attempt: 1, LeaseExpiresAt: at(30), CreatedAt: at(0), ExpiresAt: at(0) + defTTL,
	}
}

func rec(edit func(r *Record)) *Record {
	r := base()
	edit(r)
	return r
}

var charged = resp(201, `{"id":"ch_1"}`)

// done is base completed at at(1) with charged.
func done() *Record {
	return rec(func(r *Record) {
		r.State, r.CompletedAt, r.LeaseExpiresAt, r.Response = StateCompleted, at(1), 0, charged
	})
}

type applyCase struct {
	name  string
	setup []*Command // applied at log indexes 1..len(setup)
	cmd   *Command   // applied at index len(setup)+1
	want  Outcome
	rec   *Record                        // the Result's record; nil means it must be nil
	after func(t *testing.T, h *harness) // optional checks of the state afterwards
}

// Shorthands for the setups the table repeats.
var (
	claimed   = []*Command{claim("k", "o1", at(0))}
	completed = []*Command{claim("k", "o1", at(0)), complete("k", tok(1), charged, at(1))}
	takenOver = []*Command{claim("k", "o1", at(0)), claim("k", "o2", at(31))}
	shortTTL  = []*Command{claimWith("k", defFP, "o1", defLease, 60*sec, at(0))}
)

// applyCases has one case per row of the outcome tables of docs/API.md,
// plus the edges the rows imply (boundaries, lapsed leases, stale holders).
var applyCases = []applyCase{
	// Claim.
	{name: "claim/absent wins new", cmd: claim("k", "o1", at(0)), want: OutcomeWon, rec: base()},
	{name: "claim/lease longer than TTL sets expires_at", cmd: claimWith("k", defFP, "o1", 3600*sec, 60*sec, at(0)),
		want: OutcomeWon, rec: rec(func(r *Record) { r.LeaseExpiresAt, r.ExpiresAt = at(3600), at(3600) })},
	{name: "claim/past expires_at wins new even with other fingerprint", setup: completed,
		cmd: claimFP("k", "fp-B", "o2", at(0)+defTTL), want: OutcomeWon, rec: rec(func(r *Record) {
			r.Fingerprint, r.Owner, r.Token = []byte("fp-B"), "o2", tok(3)
			r.CreatedAt, r.LeaseExpiresAt, r.ExpiresAt = at(0)+defTTL, at(30)+defTTL, at(0)+2*defTTL
		})},
	{name: "claim/other fingerprint while pending is mismatch", setup: claimed,
		cmd: claimFP("k", "fp-B", "o2", at(1)), want: OutcomeMismatch},
	{name: "claim/other fingerprint by same owner is mismatch", setup: claimed,
		cmd: claimFP("k", "fp-B", "o1", at(1)), want: OutcomeMismatch},
	{name: "claim/other fingerprint after lease lapsed is mismatch", setup: claimed,
		cmd: claimFP("k", "fp-B", "o2", at(40)), want: OutcomeMismatch},
	{name: "claim/other fingerprint on completed is mismatch", setup: completed,
		cmd: claimFP("k", "fp-B", "o2", at(2)), want: OutcomeMismatch},
	{name: "claim/same owner retried wins same token", setup: claimed,
		cmd: claim("k", "o1", at(5)), want: OutcomeWon, rec: base()},
	{name: "claim/same owner after lease lapsed wins same token", setup: claimed,
		cmd: claim("k", "o1", at(40)), want: OutcomeWon, rec: base()},
	{name: "claim/live lease is in progress with lease_expires_at", setup: claimed,
		cmd: claim("k", "o2", at(29)), want: OutcomeInProgress, rec: base()},
	{name: "claim/lease ending exactly now is taken over", setup: claimed,
		cmd: claim("k", "o2", at(30)), want: OutcomeWon, rec: rec(func(r *Record) {
			r.Owner, r.Token, r.Attempt, r.LeaseExpiresAt = "o2", tok(2), 2, at(60)
		})},
	{name: "claim/expired lease is taken over with new token", setup: claimed,
		cmd: claim("k", "o2", at(31)), want: OutcomeWon, rec: rec(func(r *Record) {
			r.Owner, r.Token, r.Attempt, r.LeaseExpiresAt = "o2", tok(2), 2, at(61)
		})},
	{name: "claim/takeover keeps the later of expiry and lease end", setup: shortTTL,
		cmd: claimWith("k", defFP, "o2", 50*sec, 60*sec, at(40)), want: OutcomeWon, rec: rec(func(r *Record) {
			r.Owner, r.Token, r.Attempt, r.LeaseExpiresAt, r.ExpiresAt = "o2", tok(2), 2, at(90), at(90)
		})},
	{name: "claim/second takeover is attempt 3", setup: takenOver,
		cmd: claim("k", "o3", at(62)), want: OutcomeWon, rec: rec(func(r *Record) {
			r.Owner, r.Token, r.Attempt, r.LeaseExpiresAt = "o3", tok(3), 3, at(92)
		})},
	{name: "claim/completed replays the response", setup: completed,
		cmd: claim("k", "o2", at(2)), want: OutcomeCompleted, rec: done()},
	{name: "claim/completed replays to its own owner", setup: completed,
		cmd: claim("k", "o1", at(2)), want: OutcomeCompleted, rec: done()},

	// Complete.
	{name: "complete/holder completes", setup: claimed,
		cmd: complete("k", tok(1), charged, at(1)), want: OutcomeOK, rec: done()},
	{name: "complete/nil response stores an empty one", setup: claimed, cmd: complete("k", tok(1), nil, at(1)),
		want: OutcomeOK, rec: rec(func(r *Record) {
			r.State, r.CompletedAt, r.LeaseExpiresAt, r.Response = StateCompleted, at(1), 0, &Response{}
		})},
	{name: "complete/holder after lease lapsed completes", setup: claimed,
		cmd: complete("k", tok(1), charged, at(45)), want: OutcomeOK,
		rec: rec(func(r *Record) {
			r.State, r.CompletedAt, r.LeaseExpiresAt, r.Response = StateCompleted, at(45), 0, charged
		})},
	{name: "complete/retried with same response is ok", setup: completed,
		cmd: complete("k", tok(1), resp(201, `{"id":"ch_1"}`), at(2)), want: OutcomeOK, rec: done()},
	{name: "complete/retried with other response is mismatch", setup: completed,
		cmd: complete("k", tok(1), resp(500, "oops"), at(2)), want: OutcomeMismatch,
		after: wantStored(done())},
	{name: "complete/retried with other status is mismatch", setup: completed,
		cmd: complete("k", tok(1), resp(200, `{"id":"ch_1"}`), at(2)), want: OutcomeMismatch},
	{name: "complete/retried with other headers is mismatch", setup: completed,
		cmd: complete("k", tok(1), &Response{Status: 201, Body: charged.Body}, at(2)), want: OutcomeMismatch},
	{name: "complete/other token is fenced", setup: claimed,
		cmd: complete("k", tok(1)+1, charged, at(1)), want: OutcomeFenced, after: wantStored(base())},
	{name: "complete/other token on completed is fenced", setup: completed,
		cmd: complete("k", tok(9), charged, at(2)), want: OutcomeFenced},
	{name: "complete/stale holder after takeover is fenced", setup: takenOver,
		cmd: complete("k", tok(1), charged, at(32)), want: OutcomeFenced,
		after: wantStored(rec(func(r *Record) { r.Owner, r.Token, r.Attempt, r.LeaseExpiresAt = "o2", tok(2), 2, at(61) }))},
	{name: "complete/absent is not found", cmd: complete("k", tok(1), charged, at(1)), want: OutcomeNotFound},
	{name: "complete/past TTL is not found", setup: shortTTL,
		cmd: complete("k", tok(1), charged, at(60)), want: OutcomeNotFound},

	// Release.
	{name: "release/holder deletes and the next claim re-executes", setup: claimed,
		cmd: release("k", tok(1), at(1)), want: OutcomeOK, after: func(t *testing.T, h *harness) {
			if _, ok := h.m.Get(rk("k")); ok || h.m.Len() != 0 {
				t.Fatalf("record still stored after release (len %d)", h.m.Len())
			}
			res := h.apply(claim("k", "o2", at(2)))
			h.want(res, OutcomeWon)
			if res.Record.Token != tok(3) || res.Record.Attempt != 1 {
				t.Fatalf("claim after release: token %d attempt %d, want %d attempt 1", res.Record.Token, res.Record.Attempt, tok(3))
			}
		}},
	{name: "release/holder after lease lapsed deletes", setup: claimed,
		cmd: release("k", tok(1), at(45)), want: OutcomeOK, after: wantAbsent},
	{name: "release/absent is ok", cmd: release("k", tok(1), at(1)), want: OutcomeOK},
	{name: "release/past TTL is ok", setup: shortTTL, cmd: release("k", tok(9), at(61)), want: OutcomeOK},
	{name: "release/other token is fenced", setup: claimed,
		cmd: release("k", tok(9), at(1)), want: OutcomeFenced, after: wantStored(base())},
	{name: "release/completed is fenced even for its token", setup: completed,
		cmd: release("k", tok(1), at(2)), want: OutcomeFenced, after: wantStored(done())},
	{name: "release/stale holder after takeover is fenced", setup: takenOver,
		cmd: release("k", tok(1), at(32)), want: OutcomeFenced},

	// Extend.
	{name: "extend/holder pushes the lease", setup: claimed,
		cmd: extend("k", tok(1), 60*sec, at(10)), want: OutcomeOK, rec: rec(func(r *Record) { r.LeaseExpiresAt = at(70) })},
	{name: "extend/never shortens the lease", setup: claimed,
		cmd: extend("k", tok(1), 5*sec, at(10)), want: OutcomeOK, rec: base()},
	{name: "extend/past the TTL pushes expires_at", setup: shortTTL,
		cmd: extend("k", tok(1), 120*sec, at(20)), want: OutcomeOK,
		rec: rec(func(r *Record) { r.LeaseExpiresAt, r.ExpiresAt = at(140), at(140) })},
	{name: "extend/holder after lease lapsed without takeover", setup: claimed,
		cmd: extend("k", tok(1), 30*sec, at(40)), want: OutcomeOK, rec: rec(func(r *Record) { r.LeaseExpiresAt = at(70) })},
	{name: "extend/other token is fenced", setup: claimed,
		cmd: extend("k", tok(7), 60*sec, at(10)), want: OutcomeFenced, after: wantStored(base())},
	{name: "extend/completed is fenced", setup: completed,
		cmd: extend("k", tok(1), 60*sec, at(2)), want: OutcomeFenced},
	{name: "extend/stale holder after takeover is fenced", setup: takenOver,
		cmd: extend("k", tok(1), 60*sec, at(32)), want: OutcomeFenced},
	{name: "extend/absent is not found", cmd: extend("k", tok(1), 60*sec, at(1)), want: OutcomeNotFound},
	{name: "extend/past TTL is not found", setup: shortTTL,
		cmd: extend("k", tok(1), 60*sec, at(60)), want: OutcomeNotFound},

	// Checkpoint.
	{name: "checkpoint/holder stores a recovery point", setup: claimed,
		cmd: checkpoint("k", tok(1), "charged", "ch_1", at(5)), want: OutcomeOK, rec: atCharged()},
	{name: "checkpoint/retried with the same data is ok", setup: chargedStep,
		cmd: checkpoint("k", tok(1), "charged", "ch_1", at(6)), want: OutcomeOK, rec: atCharged()},
	{name: "checkpoint/same point with other data is mismatch", setup: chargedStep,
		cmd: checkpoint("k", tok(1), "charged", "ch_2", at(6)), want: OutcomeMismatch, after: wantStored(atCharged())},
	{name: "checkpoint/a new point replaces the previous one", setup: chargedStep,
		cmd: checkpoint("k", tok(1), "receipt-sent", "", at(6)), want: OutcomeOK,
		rec: rec(func(r *Record) { r.Checkpoint = &Checkpoint{Point: "receipt-sent"} })},
	{name: "checkpoint/holder after lease lapsed without takeover", setup: claimed,
		cmd: checkpoint("k", tok(1), "charged", "ch_1", at(40)), want: OutcomeOK, rec: atCharged()},
	{name: "checkpoint/other token is fenced", setup: claimed,
		cmd: checkpoint("k", tok(9), "charged", "ch_1", at(5)), want: OutcomeFenced, after: wantStored(base())},
	{name: "checkpoint/stale holder after takeover is fenced", setup: takenOver,
		cmd: checkpoint("k", tok(1), "charged", "ch_1", at(32)), want: OutcomeFenced},
	{name: "checkpoint/completed is fenced", setup: completed,
		cmd: checkpoint("k", tok(1), "charged", "ch_1", at(2)), want: OutcomeFenced, after: wantStored(done())},
	{name: "checkpoint/absent is not found", cmd: checkpoint("k", tok(1), "charged", "", at(1)), want: OutcomeNotFound},
	{name: "checkpoint/past TTL is not found", setup: shortTTL,
		cmd: checkpoint("k", tok(1), "charged", "", at(60)), want: OutcomeNotFound},
	{name: "checkpoint/takeover resumes from the recovery point", setup: chargedStep,
		cmd: claim("k", "o2", at(31)), want: OutcomeWon, rec: rec(func(r *Record) {
			r.Owner, r.Token, r.Attempt, r.LeaseExpiresAt = "o2", tok(3), 2, at(61)
			r.Checkpoint = &Checkpoint{Point: "charged", Data: []byte("ch_1")}
		})},
	{name: "checkpoint/the new holder records the next point", setup: append(chargedStep[:2:2], claim("k", "o2", at(31))),
		cmd: checkpoint("k", tok(3), "receipt-sent", "", at(32)), want: OutcomeOK, rec: rec(func(r *Record) {
			r.Owner, r.Token, r.Attempt, r.LeaseExpiresAt = "o2", tok(3), 2, at(61)
			r.Checkpoint = &Checkpoint{Point: "receipt-sent"}
		})},
	{name: "checkpoint/release keeps the point and gives the record up", setup: chargedStep,
		cmd: release("k", tok(1), at(5)), want: OutcomeOK, after: func(t *testing.T, h *harness) {
			wantStored(givenUp(at(5)))(t, h)
			res := h.apply(claim("k", "o2", at(5)))
			h.want(res, OutcomeWon)
			if res.Record.Attempt != 2 || res.Record.Checkpoint == nil || res.Record.Checkpoint.Point != "charged" {
				t.Fatalf("claim after release: attempt %d, point %+v; want a takeover resuming after charged", res.Record.Attempt, res.Record.Checkpoint)
			}
		}},
	{name: "checkpoint/release after the lease lapsed gives the record up", setup: chargedStep,
		cmd: release("k", tok(1), at(40)), want: OutcomeOK, after: wantStored(givenUp(at(30)))},
	{name: "checkpoint/a retried release is ok", setup: releasedStep,
		cmd: release("k", tok(1), at(6)), want: OutcomeOK, after: wantStored(givenUp(at(5)))},
	{name: "checkpoint/the releaser cannot extend the lease back", setup: releasedStep,
		cmd: extend("k", tok(1), 60*sec, at(6)), want: OutcomeFenced, after: wantStored(givenUp(at(5)))},
	{name: "checkpoint/the releaser cannot record a step", setup: releasedStep,
		cmd: checkpoint("k", tok(1), "receipt-sent", "", at(6)), want: OutcomeFenced},
	{name: "checkpoint/the releaser cannot complete", setup: releasedStep,
		cmd: complete("k", tok(1), charged, at(6)), want: OutcomeFenced},
	{name: "checkpoint/the releaser's own claim takes the record over", setup: releasedStep,
		cmd: claim("k", "o1", at(6)), want: OutcomeWon, rec: rec(func(r *Record) {
			r.Token, r.Attempt, r.LeaseExpiresAt = tok(4), 2, at(36)
			r.Checkpoint = &Checkpoint{Point: "charged", Data: []byte("ch_1")}
		})},
	{name: "checkpoint/completion drops the recovery point", setup: chargedStep,
		cmd: complete("k", tok(1), charged, at(1)), want: OutcomeOK, rec: done()},
}

// chargedStep is claimed, then step "charged" recorded with data "ch_1";
// releasedStep is that, released at at(5).
var (
	chargedStep  = []*Command{claim("k", "o1", at(0)), checkpoint("k", tok(1), "charged", "ch_1", at(0))}
	releasedStep = append(chargedStep[:2:2], release("k", tok(1), at(5)))
)

// givenUp is atCharged released at lease end leaseEnd: no owner.
func givenUp(leaseEnd int64) *Record {
	return rec(func(r *Record) {
		r.Checkpoint, r.Owner, r.LeaseExpiresAt = &Checkpoint{Point: "charged", Data: []byte("ch_1")}, "", leaseEnd
	})
}

// atCharged is base with the recovery point of chargedStep.
func atCharged() *Record {
	return rec(func(r *Record) { r.Checkpoint = &Checkpoint{Point: "charged", Data: []byte("ch_1")} })
}

func TestApplyOutcomes(t *testing.T) {
	for _, tc := range applyCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.applyAll(tc.setup...)
			res := h.apply(tc.cmd)
			if res.Outcome != tc.want {
				t.Fatalf("outcome %v, want %v", res.Outcome, tc.want)
			}
			switch {
			case tc.rec == nil && res.Record != nil:
				t.Fatalf("result carries record %+v, want none", res.Record)
			case tc.rec != nil && !bytes.Equal(recordBytes(res.Record), recordBytes(tc.rec)):
				t.Fatalf("record\n got %+v\nwant %+v", res.Record, tc.rec)
			}
			if res.Expired != 0 || res.Batch != nil {
				t.Fatalf("unexpected Expired %d / Batch %v", res.Expired, res.Batch)
			}
			if tc.after != nil {
				tc.after(t, h)
			}
		})
	}
}

// wantStored checks that the live record under "k" is want.
func wantStored(want *Record) func(t *testing.T, h *harness) {
	return func(t *testing.T, h *harness) {
		got, ok := h.m.Get(rk("k"))
		if !ok || !bytes.Equal(recordBytes(got), recordBytes(want)) {
			t.Fatalf("stored record\n got %+v (live %v)\nwant %+v", got, ok, want)
		}
	}
}

func wantAbsent(t *testing.T, h *harness) {
	if r, ok := h.m.Get(rk("k")); ok {
		t.Fatalf("record %+v still live", r)
	}
}

// TestFencedHolderCannotOverwrite plays the whole story of a stale holder:
// after the takeover none of its calls changes the record, and the new
// holder's completion is the only one ever recorded.
func TestFencedHolderCannotOverwrite(t *testing.T) {
	h := newHarness(t)
	old := h.mustWin("k", "o1", at(0))
	cur := h.mustWin("k", "o2", at(31))
	if cur <= old {
		t.Fatalf("takeover token %d not above %d", cur, old)
	}
	r, _ := h.stored("k")
	before := recordBytes(r)
	h.want(h.apply(extend("k", old, 60*sec, at(32))), OutcomeFenced)
	h.want(h.apply(complete("k", old, resp(200, "stale"), at(33))), OutcomeFenced)
	h.want(h.apply(release("k", old, at(34))), OutcomeFenced)
	if r, _ := h.stored("k"); !bytes.Equal(recordBytes(r), before) {
		t.Fatalf("fenced calls changed the record: %+v", r)
	}
	h.want(h.apply(complete("k", cur, charged, at(35))), OutcomeOK)
	h.want(h.apply(complete("k", old, resp(200, "stale"), at(36))), OutcomeFenced)
	r, _ = h.m.Get(rk("k"))
	if !responsesEqual(r.Response, charged) {
		t.Fatalf("response %+v, want the new holder's", r.Response)
	}
}
