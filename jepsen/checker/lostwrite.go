package checker

import (
	"fmt"
	"sort"

	"github.com/idemnode/idemnode/jepsen/history"
)

// Lost writes. A completed record leaves the state machine only by
// expiring, so a completion acknowledged OK whose record expires after the
// FSM time of a node's final read must be on that read, token and body.
//
// The FSM time at a final read is bounded by the node's final status only
// when the status was taken after the read returned (FSM time never
// decreases); nodes whose status came first, or that have no status, are
// skipped with a warning. Expiries are lower bounds (grant, OK extends,
// reads of the completed record), so the check only errs towards silence.

// usableStatuses returns, per node, the final status that bounds the FSM
// time of every final read of the node, and warnings for nodes without one.
func usableStatuses(h *parsed, st map[string]*op) (map[string]*op, []Anomaly) {
	lastRead := map[string]int64{}
	for _, key := range h.keys {
		for _, r := range h.byKey[key].finalReads {
			if r.answered() {
				lastRead[r.ev.Node] = max(lastRead[r.ev.Node], r.ret)
			}
		}
	}
	nodes := make([]string, 0, len(lastRead))
	for n := range lastRead {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	usable := map[string]*op{}
	var warn []Anomaly
	for _, n := range nodes {
		s := st[n]
		switch {
		case s == nil:
			warn = append(warn, Anomaly{Kind: KindLostWrite, Explanation: fmt.Sprintf(
				"node %s has final reads but no final status: its final reads were not checked for lost writes", n)})
		case s.call < lastRead[n]:
			warn = append(warn, Anomaly{Kind: KindLostWrite, Events: s.events(), Explanation: fmt.Sprintf(
				"node %s: final status taken before its final reads returned, so FSM time at the reads is unbounded: not checked for lost writes", n)})
		default:
			usable[n] = s
		}
	}
	return usable, warn
}

// completedExpiry is a lower bound of the expiry of token t's record, 0
// when nothing is known.
func completedExpiry(k *keyOps, t uint64) int64 {
	var exp int64
	if g := k.byToken[t]; g != nil {
		exp = k.expiry(g)
	}
	for _, o := range k.ops {
		e := o.ev
		if o.answered() && e.F != history.FComplete && readState(e) == "completed" && e.RecToken == t {
			exp = max(exp, e.ExpiresAt)
		}
	}
	return exp
}

// lostWrites checks one key's acknowledged completions against the final
// reads of the nodes in usable.
func lostWrites(k *keyOps, usable map[string]*op) []Anomaly {
	var out []Anomaly
	seen := map[uint64]bool{}
	for _, c := range k.ops {
		e := c.ev
		if e.F != history.FComplete || !c.is(outOK) || seen[e.Token] {
			continue
		}
		seen[e.Token] = true
		exp := completedExpiry(k, e.Token)
		for _, r := range k.finalReads {
			s := usable[r.ev.Node]
			if s == nil || !r.answered() || exp <= s.ev.FSMTime {
				continue
			}
			if readShows(r.ev, e.Token, e.Body) {
				continue
			}
			evs := append(append(c.events(), r.events()...), s.events()...)
			out = append(out, Anomaly{Kind: KindLostWrite, Key: k.key, Events: evs,
				Explanation: fmt.Sprintf("completion of token %d acknowledged OK and alive until %s (node FSM time %s), but node %s's final read shows %s",
					e.Token, fsmt(exp), fsmt(s.ev.FSMTime), r.ev.Node, describeRead(r.ev))})
		}
	}
	return out
}

func readShows(r history.Event, token uint64, body string) bool {
	return readState(r) == "completed" && (r.RecToken == 0 || r.RecToken == token) && r.RecBody == body
}

func describeRead(r history.Event) string {
	switch readState(r) {
	case "":
		return "no record"
	case "pending":
		return fmt.Sprintf("PENDING token %d", r.RecToken)
	}
	return fmt.Sprintf("COMPLETED token %d body %q", r.RecToken, r.RecBody)
}
