package checker

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/idemnode/idemnode/jepsen/history"
)

// The linearizability model of one key. The state machine decides leases
// and TTLs with FSM time, which the history reveals only now and then: a
// new grant reveals its exact time (LeaseExpiresAt - LeaseNs), an
// IN_PROGRESS answer that time is before the lease end, an extend answered
// OK the new lease end. FSM time also moves with every other key's
// commands, so between two operations of one key it may jump arbitrarily.
//
// So a model state is a set of abstract states (mstate). Each keeps a lower
// bound of FSM time and the record with every time as an interval; a step
// picks the operation's FSM time T in [now, ∞), narrows it by what the
// answer reveals, and forks where the outcome depends on whether T passed a
// lease end or an expiry that is only known as an interval. Each fork keeps
// the constraints it implies (T < expiry narrows both), so later answers
// prune the forks they contradict. Intervals are independent, which loses
// precision but never soundness: every concrete execution of fsm/apply.go
// stays inside some abstract state.
//
// Operations with unknown answers (indeterminate, or a possible earlier
// application of a retried request: the "ghosts" of linear.go) either did
// not happen (the state stays) or took effect with any answer; their
// effect-free outcomes equal "did not happen" and are not enumerated.

// span is a closed interval of FSM times; hi == never when unbounded.
type span struct{ lo, hi int64 }

func point(v int64) span { return span{v, v} }
func from(v int64) span  { return span{v, never} }

func (s span) valid() bool { return s.lo <= s.hi }

func (s span) String() string {
	switch {
	case s.lo == s.hi:
		return fsmt(s.lo)
	case s.hi == never:
		return fmt.Sprintf("[%s,∞)", fsmt(s.lo))
	}
	return fmt.Sprintf("[%s,%s]", fsmt(s.lo), fsmt(s.hi))
}

// contains reports whether s includes every value of o.
func (s span) contains(o span) bool { return s.lo <= o.lo && o.hi <= s.hi }

// addSat adds a non-negative b without overflowing past never.
func addSat(a, b int64) int64 {
	if b > 0 && a > never-b {
		return never
	}
	return a + b
}

// mstate is one abstract state of a key: its record and a lower bound of
// FSM time. A zero mstate (apart from now) is an absent record.
type mstate struct {
	now     int64 // FSM time is at least now
	present bool
	done    bool // COMPLETED; PENDING otherwise
	owner   string
	token   uint64 // 0: unknown (granted by a claim whose answer was lost)
	attempt uint32 // 0: unknown
	lease   span   // lease end of a PENDING record
	// leaseLen > 0: lease end = grant time + leaseLen, for a grant whose
	// time is unknown; once the lease end is learnt, FSM time >= grant time.
	leaseLen int64
	exp      span
	body     string // response body of a COMPLETED record
	// point is the recovery point of a PENDING record, "name=data"; a
	// released record (released) was given up by a release that kept it
	// for its point: no owner, its token fenced.
	point    string
	released bool
	// mainDone and ghostDone hold, per ghost slot, whether only the main
	// operation or only its ghost was linearized: a ghost linearized after
	// its main operation did nothing (the hidden application precedes the
	// answer). Both are functions of the set of linearized operations, so
	// they never split porcupine's cache.
	mainDone, ghostDone uint64
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (a mstate) compare(b mstate) int {
	return cmp.Or(cmp.Compare(a.now, b.now), cmp.Compare(b2i(a.present), b2i(b.present)),
		cmp.Compare(b2i(a.done), b2i(b.done)), cmp.Compare(a.owner, b.owner),
		cmp.Compare(a.token, b.token), cmp.Compare(a.attempt, b.attempt),
		cmp.Compare(a.lease.lo, b.lease.lo), cmp.Compare(a.lease.hi, b.lease.hi),
		cmp.Compare(a.leaseLen, b.leaseLen), cmp.Compare(a.exp.lo, b.exp.lo),
		cmp.Compare(a.exp.hi, b.exp.hi), cmp.Compare(a.body, b.body),
		cmp.Compare(a.point, b.point), cmp.Compare(b2i(a.released), b2i(b.released)),
		cmp.Compare(a.mainDone, b.mainDone), cmp.Compare(a.ghostDone, b.ghostDone))
}

// covers reports whether every concrete state b allows, a allows too.
func (a mstate) covers(b mstate) bool {
	return a.present == b.present && a.done == b.done && a.owner == b.owner && a.body == b.body &&
		a.point == b.point && a.released == b.released &&
		(a.token == 0 || a.token == b.token) && (a.attempt == 0 || a.attempt == b.attempt) &&
		(a.leaseLen == 0 || a.leaseLen == b.leaseLen) && a.now <= b.now &&
		a.lease.contains(b.lease) && a.exp.contains(b.exp) &&
		a.mainDone == b.mainDone && a.ghostDone == b.ghostDone
}

func (a mstate) String() string {
	if !a.present {
		return fmt.Sprintf("absent, now≥%s", fsmt(a.now))
	}
	state := "PENDING"
	if a.done {
		state = fmt.Sprintf("COMPLETED %q", a.body)
	}
	tok := "?"
	if a.token != 0 {
		tok = fmt.Sprint(a.token)
	}
	s := fmt.Sprintf("%s token=%s owner=%s attempt=%d exp=%s", state, tok, a.owner, a.attempt, a.exp)
	if !a.done {
		s += " lease=" + a.lease.String()
	}
	if a.point != "" {
		s += fmt.Sprintf(" point=%q", a.point)
	}
	if a.released {
		s += " released"
	}
	return s + fmt.Sprintf(", now≥%s", fsmt(a.now))
}

// canonical sorts the states in place, drops duplicates and states
// another covers (keeping the maximal ones), so that equal sets compare
// equal; it returns a prefix of states.
func canonical(states []mstate) []mstate {
	slices.SortFunc(states, mstate.compare)
	states = slices.Compact(states)
	var marks [64]bool
	drop := marks[:0]
	if len(states) > len(marks) {
		drop = make([]bool, 0, len(states))
	}
	for i, s := range states {
		covered := false
		for j, o := range states {
			if i != j && o.covers(s) {
				covered = true
				break
			}
		}
		drop = append(drop, covered)
	}
	out := states[:0]
	for i, s := range states {
		if !drop[i] {
			out = append(out, s)
		}
	}
	return out
}

// input is what an operation asked for.
type input struct {
	f          string
	owner      string
	token      uint64
	body       string
	lease, ttl int64
	// ghost marks a possible earlier application of a retried request.
	ghost bool
	// slot pairs an operation with its ghost (-1: no ghost, or no slot).
	slot int
}

// output is what an operation was answered; known is false when the
// answer is unknown (indeterminate operations and ghosts).
type output struct {
	known   bool
	outcome string
	state   string // reads: "", "pending" or "completed"
	token   uint64
	body    string
	point   string // claim WON: the recovery point it resumes from
	attempt uint32
	lea     int64
	exp     int64
}

func (o output) is(outcome string) bool { return o.known && o.outcome == outcome }

// keyModel is the model of one key. It keeps scratch buffers, so one
// instance serves one porcupine check at a time.
type keyModel struct {
	// owners maps every token a client was told WON to its owner: a record
	// whose token is unknown can only hold a token its owner won.
	owners map[uint64]string
	cands  []cand
	states []mstate
}

var hashSeed = maphash.MakeSeed()

func (m *keyModel) porcupine() porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return []mstate{{}} },
		Step: func(st, in, out interface{}) (bool, interface{}) {
			m.states = m.states[:0]
			for _, s := range st.([]mstate) {
				m.states = m.step(s, in.(input), out.(output), m.states)
			}
			next := canonical(m.states)
			if len(next) == 0 {
				return false, nil
			}
			return true, slices.Clone(next)
		},
		Equal: func(a, b interface{}) bool { return slices.Equal(a.([]mstate), b.([]mstate)) },
		Hash: func(st interface{}) uint64 {
			var h uint64
			for _, s := range st.([]mstate) {
				h = h*31 + maphash.Comparable(hashSeed, s)
			}
			return h
		},
		DescribeOperation: describeOp,
		DescribeState: func(st interface{}) string {
			parts := make([]string, 0, len(st.([]mstate)))
			for _, s := range st.([]mstate) {
				parts = append(parts, s.String())
			}
			return "{" + strings.Join(parts, " | ") + "}"
		},
		DescribeOperationMetadata: func(md interface{}) string {
			if md == nil {
				return ""
			}
			return fmt.Sprint(md)
		},
	}
}

// step appends to dst every abstract state s can reach by the operation.
func (m *keyModel) step(s mstate, in input, out output, dst []mstate) []mstate {
	if in.slot >= 0 {
		bit := uint64(1) << in.slot
		switch {
		case in.ghost && s.mainDone&bit != 0:
			s.mainDone &^= bit
			return append(dst, s) // after the answer: it did nothing
		case in.ghost:
			s.ghostDone |= bit
		case s.ghostDone&bit != 0:
			s.ghostDone &^= bit
		default:
			s.mainDone |= bit
		}
	}
	c := cand{s: s, t: from(s.now)}
	next := m.cands[:0]
	switch in.f {
	case history.FClaim:
		next = m.claim(c, in, out, next)
	case history.FComplete:
		next = m.complete(c, in, out, next)
	case history.FRelease:
		next = m.release(c, in, out, next)
	case history.FExtend:
		next = m.extend(c, in, out, next)
	case history.FCheckpoint:
		next = m.checkpoint(c, in, out, next)
	case history.FGet, history.FWait:
		next = m.read(c, out, next)
	}
	m.cands = next
	if !out.known {
		dst = append(dst, s) // it did not happen
	}
	for _, n := range next {
		n := n.finish()
		n.mainDone, n.ghostDone = s.mainDone, s.ghostDone
		dst = append(dst, n)
	}
	return dst
}

func describeOp(in, out interface{}) string {
	i, o := in.(input), out.(output)
	var args string
	switch i.f {
	case history.FClaim:
		args = fmt.Sprintf("owner=%s lease=%s ttl=%s", i.owner, dur(i.lease), dur(i.ttl))
	case history.FComplete:
		args = fmt.Sprintf("token=%d body=%q", i.token, i.body)
	case history.FRelease:
		args = fmt.Sprintf("token=%d", i.token)
	case history.FExtend:
		args = fmt.Sprintf("token=%d lease=%s", i.token, dur(i.lease))
	case history.FCheckpoint:
		args = fmt.Sprintf("token=%d point=%q", i.token, i.body)
	}
	s := fmt.Sprintf("%s(%s)", i.f, args)
	switch {
	case i.ghost:
		return s + " → (retry: may have applied earlier)"
	case !o.known:
		return s + " → ? (indeterminate)"
	case i.f == history.FGet || i.f == history.FWait:
		return fmt.Sprintf("%s → %s state=%q token=%d body=%q lease=%s exp=%s", s, o.outcome, o.state, o.token, o.body, fsmt(o.lea), fsmt(o.exp))
	}
	return fmt.Sprintf("%s → %s token=%d attempt=%d lease=%s exp=%s", s, o.outcome, o.token, o.attempt, fsmt(o.lea), fsmt(o.exp))
}
