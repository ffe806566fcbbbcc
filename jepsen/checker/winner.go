package checker

import (
	"fmt"
	"time"

	"github.com/idemnode/idemnode/jepsen/history"
)

// The one-winner checker. Its rules follow from the state machine alone:
//
//   - Tokens are unique per log position, so one token has one owner.
//   - Tokens and FSM time both grow with the log, so grant times follow
//     token order.
//   - A grant X after a grant G of the same key: G's record ended by a
//     takeover (at FSM time >= G's lease end), by expiry (>= its expiry,
//     which is never before its lease end), by completion and then expiry,
//     or by a release with G's token. FSM time never decreases, so unless
//     G may have been released before X returned, T(X) >= lease end of G.
//   - A fresh grant X (attempt 1) needs the key absent. Following the chain
//     of records from G to X (takeovers only push the expiry out), unless a
//     record with a token in [G, X) may have been released, T(X) >= expiry
//     of G. Records granted to no client (indeterminate claims, retried
//     claims) cannot be released: release needs the token, and clients only
//     release tokens they were told.
//
// Lease ends and expiries are lower bounds (the grant's answer raised by
// extends answered OK), so missing information only weakens the checks.

// checkWinners runs the one-winner rules on one key.
func checkWinners(k *keyOps) []Anomaly {
	var out []Anomaly
	out = append(out, duplicateWinners(k)...)
	out = append(out, timeRegressions(k)...)
	for j, x := range k.grants {
		if !x.tKnown {
			continue
		}
		if a, ok := leaseViolation(k, j); ok {
			out = append(out, a)
		}
		if a, ok := earlyRegrant(k, j); ok {
			out = append(out, a)
		}
	}
	for _, o := range k.ops {
		if o.ev.F == history.FClaim && o.is(outMismatch) {
			out = append(out, Anomaly{Kind: KindClaimMismatch, Key: k.key, Events: o.events(),
				Explanation: fmt.Sprintf("claim by owner %q answered MISMATCH, but every claim of a key has the same fingerprint", o.ev.Owner)})
		}
	}
	return out
}

func duplicateWinners(k *keyOps) []Anomaly {
	var out []Anomaly
	first := map[uint64]*grant{}
	for _, g := range k.grants {
		f, ok := first[g.token]
		if !ok {
			first[g.token] = g
			continue
		}
		if f.owner != g.owner {
			out = append(out, Anomaly{Kind: KindDuplicateWinner, Key: k.key,
				Events:      append(f.op.events(), g.op.events()...),
				Explanation: fmt.Sprintf("owners %q and %q were both told WON with token %d", f.owner, g.owner, g.token)})
		}
	}
	return out
}

func timeRegressions(k *keyOps) []Anomaly {
	var out []Anomaly
	var latest *grant // the grant with the largest known FSM time so far
	for _, g := range k.grants {
		if !g.tKnown {
			continue
		}
		if latest != nil && g.token > latest.token && g.t < latest.t {
			out = append(out, Anomaly{Kind: KindTimeRegression, Key: k.key,
				Events: append(latest.op.events(), g.op.events()...),
				Explanation: fmt.Sprintf("token %d granted at FSM time %s, before token %d at %s: FSM time went backwards along the log",
					g.token, fsmt(g.t), latest.token, fsmt(latest.t))})
		}
		if latest == nil || g.t > latest.t {
			latest = g
		}
	}
	return out
}

// leaseViolation checks grant j against every earlier grant that cannot
// have been released before it.
func leaseViolation(k *keyOps, j int) (Anomaly, bool) {
	x := k.grants[j]
	for _, g := range k.grants[:j] {
		if g.token == x.token || k.mayRelease(g.token, g.token+1, x.op.ret) {
			continue
		}
		if end := k.leaseEnd(g); x.t < end {
			return Anomaly{Kind: KindLeaseViolation, Key: k.key,
				Events: append(g.op.events(), x.op.events()...),
				Explanation: fmt.Sprintf("token %d (owner %q, attempt %d) granted at FSM time %s, %s before the lease of token %d (owner %q) ended at %s",
					x.token, x.owner, x.attempt, fsmt(x.t), dur(end-x.t), g.token, g.owner, fsmt(end))}, true
		}
	}
	return Anomaly{}, false
}

// earlyRegrant checks a fresh grant j against every earlier grant whose
// chain of records up to j cannot have been released.
func earlyRegrant(k *keyOps, j int) (Anomaly, bool) {
	x := k.grants[j]
	if x.attempt != 1 {
		return Anomaly{}, false
	}
	for _, g := range k.grants[:j] {
		if g.token == x.token || k.mayRelease(g.token, x.token, x.op.ret) {
			continue
		}
		if exp := k.expiry(g); x.t < exp {
			return Anomaly{Kind: KindEarlyRegrant, Key: k.key,
				Events: append(g.op.events(), x.op.events()...),
				Explanation: fmt.Sprintf("fresh grant of token %d (owner %q) at FSM time %s, %s before the record of token %d (owner %q, never released) expired at %s",
					x.token, x.owner, fsmt(x.t), dur(exp-x.t), g.token, g.owner, fsmt(exp))}, true
		}
	}
	return Anomaly{}, false
}

// checkFencing flags completes and extends answered OK with a token while
// an operation that returned before the call began had shown a record with
// a larger token (a grant, a read, a completion): the token's record was
// gone for good. (A release answered OK proves nothing: releasing an absent
// record is OK.)
func checkFencing(k *keyOps) []Anomaly {
	var out []Anomaly
	for _, o := range k.ops {
		e := o.ev
		if e.F != history.FComplete && e.F != history.FExtend && e.F != history.FCheckpoint || !o.is(outOK) {
			continue
		}
		for _, p := range k.ops {
			if v, ok := shown(p); ok && v.token > e.Token && p.ret < o.call {
				out = append(out, Anomaly{Kind: KindFencing, Key: k.key,
					Events: append(p.events(), o.events()...),
					Explanation: fmt.Sprintf("%s with token %d answered OK although %s had shown %s before the call began",
						e.F, e.Token, p.ev.F, v)})
				break
			}
		}
	}
	return out
}

// dur renders a nanosecond difference.
func dur(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

// fsmt renders an FSM time (Unix ns) as a UTC clock time to the µs; 0 is
// "-" (not recorded) and never "∞".
func fsmt(ns int64) string {
	switch ns {
	case 0:
		return "-"
	case never:
		return "∞"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000000")
}
