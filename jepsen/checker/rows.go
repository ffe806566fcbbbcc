package checker

import "strings"

// The rows of the outcome tables (docs/API.md, fsm/apply.go), over
// abstract states. Each row function gets a candidate whose FSM time range
// and record already satisfy the row's lookup (live or gone), narrows them
// by the row's conditions and the answer, and returns the candidates that
// survive (none when the answer contradicts the row).

// cand is a state being stepped: the record and the range of the
// operation's FSM time T.
type cand struct {
	s mstate
	t span
}

// finish returns the state after the operation: FSM time is now at least
// the lowest T the operation may have run at.
func (c cand) finish() mstate {
	s := c.s
	if !s.present {
		s = mstate{}
	}
	s.now = c.t.lo
	return s
}

// before narrows T < *x.
func (c *cand) before(x *span) bool {
	if x.hi != never {
		c.t.hi = min(c.t.hi, x.hi-1)
	}
	x.lo = max(x.lo, addSat(c.t.lo, 1))
	return c.t.valid() && x.valid()
}

// notBefore narrows T >= *x.
func (c *cand) notBefore(x *span) bool {
	c.t.lo = max(c.t.lo, x.lo)
	x.hi = min(x.hi, c.t.hi)
	return c.t.valid() && x.valid()
}

// at pins T = v.
func (c *cand) at(v int64) bool {
	if v < c.t.lo || v > c.t.hi {
		return false
	}
	c.t = point(v)
	return true
}

// atMost narrows T <= v.
func (c *cand) atMost(v int64) bool {
	c.t.hi = min(c.t.hi, v)
	return c.t.valid()
}

// grantAt narrows T by a grant's answer: lease end = T + lease.
func (c *cand) grantAt(lease, lea int64) bool {
	switch {
	case lea == 0:
		return true // not recorded
	case lease > 0:
		return c.at(lea - lease)
	}
	return c.atMost(lea - 1) // the server's default lease, unknown here
}

// alive narrows T before the record's expiry.
func (c *cand) alive() bool { return c.before(&c.s.exp) }

// pinSpan pins *x to v; 0 means the answer did not carry it.
func pinSpan(x *span, v int64) bool {
	if v == 0 {
		return true
	}
	if v < x.lo || v > x.hi {
		return false
	}
	*x = point(v)
	return true
}

func (c *cand) pinExp(v int64) bool { return pinSpan(&c.s.exp, v) }

// pinLease pins the lease end; a grant of unknown time then bounds T.
func (c *cand) pinLease(v int64) bool {
	if !pinSpan(&c.s.lease, v) {
		return false
	}
	if v != 0 && c.s.leaseLen > 0 {
		c.t.lo = max(c.t.lo, v-c.s.leaseLen)
		c.s.leaseLen = 0
	}
	return c.t.valid()
}

func (c *cand) pinAttempt(a uint32) bool {
	switch {
	case a == 0:
		return true
	case c.s.attempt == 0:
		c.s.attempt = a
		return true
	}
	return c.s.attempt == a
}

// pinToken pins the record's token; an unknown token can only be one its
// owner was told.
func (m *keyModel) pinToken(c *cand, v uint64) bool {
	switch {
	case v == 0:
		return true
	case c.s.token != 0:
		return c.s.token == v
	}
	if o, ok := m.owners[v]; ok && o != c.s.owner {
		return false
	}
	c.s.token = v
	return true
}

// live returns c narrowed to a live record at T.
func (c cand) live() (cand, bool) {
	if !c.s.present {
		return c, false
	}
	return c, c.alive()
}

// gone returns c narrowed to no live record at T (an expired one is dropped).
func (c cand) gone() (cand, bool) {
	if !c.s.present {
		return c, true
	}
	if !c.notBefore(&c.s.exp) {
		return c, false
	}
	c.s = mstate{}
	return c, true
}

// tokenSplit splits a live candidate by whether the record holds token t:
// eq (valid when eqOK) holds it; c itself, when neOK, does not.
func (m *keyModel) tokenSplit(c cand, t uint64) (eq cand, eqOK, neOK bool) {
	if c.s.token != 0 {
		return c, c.s.token == t, c.s.token != t
	}
	if o, ok := m.owners[t]; !ok || o == c.s.owner {
		eq, eqOK = c, true
		eq.s.token = t
	}
	return eq, eqOK, true
}

func inc(a uint32) uint32 {
	if a == 0 {
		return 0
	}
	return a + 1
}

// pointOr is v when the answer carried it, else at least lo.
func pointOr(v, lo int64) span {
	if v != 0 {
		return point(v)
	}
	return from(lo)
}

// The row functions append the surviving candidates to out.

// holder runs the rows a holder's command (complete, release, extend,
// checkpoint) shares: no live record answers absent; a record another
// token holds answers FENCED. It returns the candidate where in.token
// holds the record (valid when eqOK), for the command's own rows.
func (m *keyModel) holder(c cand, in input, o output, absent string, out []cand) (e cand, eqOK bool, _ []cand) {
	if g, ok := c.gone(); ok && o.is(absent) {
		out = append(out, g)
	}
	l, ok := c.live()
	if !ok {
		return l, false, out
	}
	e, eqOK, neOK := m.tokenSplit(l, in.token)
	if neOK && o.is(outFenced) {
		out = append(out, l)
	}
	return e, eqOK, out
}

func (m *keyModel) claim(c cand, in input, o output, out []cand) []cand {
	if g, ok := c.gone(); ok {
		out = fresh(g, in, o, out)
	}
	l, ok := c.live()
	switch {
	case !ok:
	case l.s.done:
		if o.is(outCompleted) && m.pinToken(&l, o.token) && l.s.body == o.body &&
			l.pinAttempt(o.attempt) && l.pinExp(o.exp) && l.alive() {
			out = append(out, l)
		}
	case l.s.owner == in.owner && !l.s.released:
		if o.is(outWon) && m.pinToken(&l, o.token) && l.pinLease(o.lea) &&
			l.pinExp(o.exp) && l.pinAttempt(o.attempt) && l.alive() && l.s.point == o.point {
			out = append(out, l)
		}
	default:
		if p := l; o.is(outInProgress) && p.pinLease(o.lea) && p.pinExp(o.exp) &&
			p.pinAttempt(o.attempt) && p.alive() && p.before(&p.s.lease) {
			out = append(out, p)
		}
		out = takeover(l, in, o, out)
	}
	return out
}

// fresh: no live record, the claim creates one.
func fresh(g cand, in input, o output, out []cand) []cand {
	if !o.known {
		lease := from(addSat(g.t.lo, in.lease))
		g.s = mstate{present: true, owner: in.owner, attempt: 1, lease: lease, leaseLen: in.lease,
			exp: from(addSat(g.t.lo, max(in.ttl, in.lease)))}
		return append(out, g)
	}
	if o.outcome != outWon || o.attempt > 1 || o.point != "" || !g.grantAt(in.lease, o.lea) {
		return out
	}
	if in.lease > 0 && in.ttl > 0 && o.lea != 0 && o.exp != 0 && o.exp != max(g.t.lo+in.ttl, g.t.lo+in.lease) {
		return out
	}
	g.s = mstate{present: true, owner: in.owner, token: o.token, attempt: 1,
		lease: pointOr(o.lea, g.t.lo), exp: pointOr(o.exp, o.lea)}
	return append(out, g)
}

// takeover: a PENDING record of another owner whose lease ended.
func takeover(l cand, in input, o output, out []cand) []cand {
	if !o.known {
		if !l.notBefore(&l.s.lease) {
			return out
		}
		lease := from(addSat(l.t.lo, in.lease))
		l.s = mstate{present: true, owner: in.owner, attempt: inc(l.s.attempt), lease: lease,
			leaseLen: in.lease, exp: from(max(l.s.exp.lo, lease.lo)), point: l.s.point}
		return append(out, l)
	}
	if o.outcome != outWon || l.s.attempt != 0 && o.attempt != 0 && o.attempt != l.s.attempt+1 || o.point != l.s.point {
		return out
	}
	if !l.grantAt(in.lease, o.lea) || !l.notBefore(&l.s.lease) || !l.alive() {
		return out
	}
	switch {
	case o.exp == 0 || o.lea == 0:
	case o.exp < o.lea:
		return out
	case o.exp == o.lea: // expiry = max(old, lease end): old <= lease end
		if l.s.exp.lo > o.lea {
			return out
		}
	case !l.pinExp(o.exp):
		return out
	}
	attempt := o.attempt
	if attempt == 0 {
		attempt = inc(l.s.attempt)
	}
	l.s = mstate{present: true, owner: in.owner, token: o.token, attempt: attempt,
		lease: pointOr(o.lea, l.t.lo), exp: pointOr(o.exp, max(o.lea, l.s.exp.lo)), point: l.s.point}
	return append(out, l)
}

func (m *keyModel) complete(c cand, in input, o output, out []cand) []cand {
	e, eqOK, out := m.holder(c, in, o, outNotFound, out)
	switch {
	case !eqOK:
	case e.s.released: // its holder gave it up: fenced
		if o.is(outFenced) {
			out = append(out, e)
		}
	case e.s.done && e.s.body == in.body:
		if o.is(outOK) {
			out = append(out, e)
		}
	case e.s.done:
		if o.is(outMismatch) {
			out = append(out, e)
		}
	case !o.known || o.outcome == outOK:
		e.s.done, e.s.body, e.s.lease, e.s.leaseLen, e.s.point = true, in.body, span{}, 0, ""
		out = append(out, e)
	}
	return out
}

func (m *keyModel) release(c cand, in input, o output, out []cand) []cand {
	e, eqOK, out := m.holder(c, in, o, outOK, out)
	switch {
	case !eqOK:
	case e.s.done:
		if o.is(outFenced) {
			out = append(out, e)
		}
	case e.s.released: // a retried release of a record it gave up
		if !o.known || o.outcome == outOK {
			out = append(out, e)
		}
	case e.s.point != "":
		// Kept for its recovery point: given up, the lease ended by T.
		if !o.known || o.outcome == outOK {
			e.s.released, e.s.leaseLen = true, 0
			e.s.lease = span{min(e.s.lease.lo, e.t.lo), min(e.s.lease.hi, e.t.hi)}
			out = append(out, e)
		}
	case !o.known || o.outcome == outOK:
		e.s = mstate{}
		out = append(out, e)
	}
	return out
}

// checkpoint: the holder records a recovery point, "name=data" in in.body.
func (m *keyModel) checkpoint(c cand, in input, o output, out []cand) []cand {
	e, eqOK, out := m.holder(c, in, o, outNotFound, out)
	switch {
	case !eqOK:
	case e.s.done || e.s.released:
		if o.is(outFenced) {
			out = append(out, e)
		}
	case pointName(e.s.point) == pointName(in.body) && e.s.point != in.body:
		if o.is(outMismatch) {
			out = append(out, e)
		}
	case !o.known || o.outcome == outOK:
		e.s.point = in.body
		out = append(out, e)
	}
	return out
}

// pointName is the name of a "name=data" recovery point ("" for none).
func pointName(p string) string {
	name, _, _ := strings.Cut(p, "=")
	return name
}

func (m *keyModel) extend(c cand, in input, o output, out []cand) []cand {
	e, eqOK, out := m.holder(c, in, o, outNotFound, out)
	switch {
	case !eqOK:
	case e.s.done || e.s.released:
		if o.is(outFenced) {
			out = append(out, e)
		}
	case !o.known || o.outcome == outOK && o.lea == 0:
		// lease end = max(old, T+lease), T unknown.
		e.s.lease = from(max(e.s.lease.lo, addSat(e.t.lo, in.lease)))
		e.s.exp, e.s.leaseLen = from(max(e.s.exp.lo, e.s.lease.lo)), 0
		out = append(out, e)
	case o.outcome == outOK:
		out = extendedTo(e, in.lease, o.lea, out)
	}
	return out
}

// extendedTo: an extend answered OK with lease end v = max(old, T+lease):
// either T+lease = v (T known) and old <= v, or old = v and T+lease <= v.
func extendedTo(e cand, lease, v int64, out []cand) []cand {
	n := len(out)
	byT := e
	byT.s.lease.hi = min(byT.s.lease.hi, v)
	if byT.grantAt(lease, v) && byT.s.lease.valid() {
		out = append(out, byT)
	}
	byOld := e
	if byOld.pinLease(v) && (lease == 0 || byOld.atMost(v-lease)) {
		out = append(out, byOld)
	}
	for i := n; i < len(out); i++ {
		s := &out[i].s
		s.lease, s.leaseLen = point(v), 0
		s.exp = span{max(s.exp.lo, v), max(s.exp.hi, v)}
	}
	return out
}

// read: a linearizable get or wait answered with the record it saw.
func (m *keyModel) read(c cand, o output, out []cand) []cand {
	if o.state == "" {
		if g, ok := c.gone(); ok {
			out = append(out, g)
		}
		return out
	}
	l, ok := c.live()
	if !ok || l.s.done != (o.state == "completed") || !m.pinToken(&l, o.token) ||
		!l.pinAttempt(o.attempt) || !l.pinExp(o.exp) || !l.alive() {
		return out
	}
	if l.s.done && l.s.body != o.body || !l.s.done && !l.pinLease(o.lea) {
		return out
	}
	return append(out, l)
}
