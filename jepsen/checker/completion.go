package checker

import (
	"fmt"
	"sort"

	"github.com/idemnode/idemnode/jepsen/history"
)

// The one-completion checker. A completion needs the record's current
// token and turns the record COMPLETED; a COMPLETED record accepts only the
// identical completion again and leaves only by expiring. So:
//   - one token, one body among completes answered OK;
//   - two tokens t1 < t2 both completed OK: t1's completion came before
//     t2's grant (after it, t1 is fenced), so t2's grant waited for the
//     completed record to expire: T(t2) >= expiry of t1;
//   - a read of a COMPLETED record returns a body some complete with that
//     token sent and that may have taken effect (any answer but MISMATCH,
//     or indeterminate: a retried complete may have stored its body before
//     an expiry made its final answer NOT_FOUND), and the body of the OK
//     complete when there is one.

// checkCompletions runs the one-completion rules on one key.
func checkCompletions(k *keyOps) []Anomaly {
	var out []Anomaly
	done := map[uint64]*op{} // token → first complete answered OK
	var tokens []uint64
	for _, o := range k.ops {
		e := o.ev
		if e.F != history.FComplete || !o.is(outOK) {
			continue
		}
		first, ok := done[e.Token]
		if !ok {
			done[e.Token] = o
			tokens = append(tokens, e.Token)
			continue
		}
		if first.ev.Body != e.Body {
			out = append(out, Anomaly{Kind: KindConflictingCompletions, Key: k.key,
				Events:      append(first.events(), o.events()...),
				Explanation: fmt.Sprintf("token %d completed OK with two bodies %q and %q", e.Token, first.ev.Body, e.Body)})
		}
	}
	sort.Slice(tokens, func(i, j int) bool { return tokens[i] < tokens[j] })
	out = append(out, doubleCompletions(k, tokens, done)...)
	for _, o := range k.reads() {
		if a, ok := phantomRead(k, o, done); ok {
			out = append(out, a)
		}
	}
	return out
}

// doubleCompletions checks every pair of tokens completed OK.
func doubleCompletions(k *keyOps, tokens []uint64, done map[uint64]*op) []Anomaly {
	var out []Anomaly
	for j, t2 := range tokens {
		g2 := k.byToken[t2]
		if g2 == nil || !g2.tKnown {
			continue
		}
		for _, t1 := range tokens[:j] {
			g1 := k.byToken[t1]
			if g1 == nil {
				continue
			}
			if exp := k.expiry(g1); g2.t < exp {
				evs := append(done[t1].events(), g2.op.events()...)
				out = append(out, Anomaly{Kind: KindDoubleCompletion, Key: k.key,
					Events: append(evs, done[t2].events()...),
					Explanation: fmt.Sprintf("tokens %d and %d both completed OK, but token %d was granted at FSM time %s, %s before the completed record of token %d expired at %s",
						t1, t2, t2, fsmt(g2.t), dur(exp-g2.t), t1, fsmt(exp))})
				break
			}
		}
	}
	return out
}

// readState is the record state a read answered: "", "pending" or "completed".
func readState(e history.Event) string {
	if e.RecState != "" {
		return e.RecState
	}
	switch e.Outcome {
	case outCompleted:
		return "completed"
	case outInProgress:
		return "pending"
	}
	return ""
}

// reads returns every answered operation that showed a COMPLETED record:
// claims answered COMPLETED, gets, waits and final reads.
func (k *keyOps) reads() []*op {
	var out []*op
	for _, o := range append(append([]*op(nil), k.ops...), k.finalReads...) {
		if !o.answered() {
			continue
		}
		switch o.ev.F {
		case history.FClaim, history.FGet, history.FWait, history.FFinalRead:
			if readState(o.ev) == "completed" {
				out = append(out, o)
			}
		}
	}
	return out
}

// phantomRead checks that a read's body was sent by a complete with the
// read's token that may have taken effect.
func phantomRead(k *keyOps, r *op, done map[uint64]*op) (Anomaly, bool) {
	e := r.ev
	if c := done[e.RecToken]; c != nil && c.ev.Body != e.RecBody {
		return Anomaly{Kind: KindPhantomRead, Key: k.key, Events: append(c.events(), r.events()...),
			Explanation: fmt.Sprintf("%s on %s read token %d with body %q, but the completion acknowledged for that token is %q",
				e.F, nodeName(e), e.RecToken, e.RecBody, c.ev.Body)}, true
	}
	for _, o := range k.ops {
		c := o.ev
		if c.F == history.FComplete && o.mayHaveHappened() && !o.is(outMismatch) &&
			c.Body == e.RecBody && (e.RecToken == 0 || c.Token == e.RecToken) {
			return Anomaly{}, false
		}
	}
	return Anomaly{Kind: KindPhantomRead, Key: k.key, Events: r.events(),
		Explanation: fmt.Sprintf("%s on %s read token %d with body %q, which no complete with that token sent",
			e.F, nodeName(e), e.RecToken, e.RecBody)}, true
}

func nodeName(e history.Event) string {
	if e.Node == "" {
		return "?"
	}
	return e.Node
}

// checkFinal runs the lost-write checker: final digests and applied
// indexes, and acknowledged completions on every node's final read.
func checkFinal(h *parsed) (anomalies, warnings []Anomaly) {
	st := latestStatuses(h)
	anomalies = append(anomalies, convergence(st)...)
	usable, warnings := usableStatuses(h, st)
	for _, key := range h.keys {
		anomalies = append(anomalies, lostWrites(h.byKey[key], usable)...)
	}
	return anomalies, warnings
}

// latestStatuses returns the last answered final status of each node.
func latestStatuses(h *parsed) map[string]*op {
	m := map[string]*op{}
	for _, o := range h.statuses {
		if o.answered() && (m[o.ev.Node] == nil || o.call >= m[o.ev.Node].call) {
			m[o.ev.Node] = o
		}
	}
	return m
}

func sortedNodes(st map[string]*op) []string {
	nodes := make([]string, 0, len(st))
	for n := range st {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	return nodes
}

// convergence flags nodes that ended at different applied indexes, and
// different digests at one applied index.
func convergence(st map[string]*op) []Anomaly {
	var out []Anomaly
	var all []history.Event
	byIndex := map[uint64][]*op{}
	var indexes []uint64
	for _, n := range sortedNodes(st) {
		o := st[n]
		all = append(all, o.events()...)
		if byIndex[o.ev.AppliedIndex] == nil {
			indexes = append(indexes, o.ev.AppliedIndex)
		}
		byIndex[o.ev.AppliedIndex] = append(byIndex[o.ev.AppliedIndex], o)
	}
	if len(indexes) > 1 {
		out = append(out, Anomaly{Kind: KindNotConverged, Events: all,
			Explanation: fmt.Sprintf("nodes ended at %d different applied indexes %v", len(indexes), indexes)})
	}
	for _, idx := range indexes {
		group := byIndex[idx]
		for _, o := range group[1:] {
			if o.ev.Digest != group[0].ev.Digest {
				out = append(out, Anomaly{Kind: KindDigestMismatch,
					Events: append(group[0].events(), o.events()...),
					Explanation: fmt.Sprintf("at applied index %d node %s has digest %s but node %s has %s",
						idx, group[0].ev.Node, group[0].ev.Digest, o.ev.Node, o.ev.Digest)})
			}
		}
	}
	return out
}
