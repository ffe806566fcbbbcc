package checker

import (
	"math"
	"slices"
	"sort"

	"github.com/idemnode/idemnode/jepsen/history"
)

// never is the return time of an indeterminate operation: it may take
// effect at any time after its invocation.
const never = math.MaxInt64

// Outcome names as the harness records them (Event.Outcome).
const (
	outWon        = "won"
	outInProgress = "in_progress"
	outCompleted  = "completed"
	outMismatch   = "mismatch"
	outFenced     = "fenced"
	outNotFound   = "not_found"
	outOK         = "ok"
)

// op is one operation: its invocation paired with its completion.
type op struct {
	inv  *history.Event // nil when the history holds no invocation
	done history.Event  // the completion; synthesised as info when missing
	// ev is the completion with the invocation's inputs filled in.
	ev        history.Event
	call, ret int64 // ret is never for indeterminate operations
	// open: the history ends before the operation completed.
	open bool
}

// events returns the history events of the operation, for reports.
func (o *op) events() []history.Event {
	if o.inv == nil {
		return []history.Event{o.done}
	}
	return []history.Event{*o.inv, o.done}
}

// answered: the server answered (Type ok).
func (o *op) answered() bool { return o.ev.Type == history.OK }

// mayHaveHappened: answered or indeterminate, not certainly refused.
func (o *op) mayHaveHappened() bool { return o.ev.Type != history.Fail }

// is reports an answered operation with outcome out.
func (o *op) is(out string) bool { return o.answered() && o.ev.Outcome == out }

// grant is a claim answered WON: a grant a client knows of.
type grant struct {
	op      *op
	token   uint64
	owner   string
	attempt uint32
	lea     int64 // lease end at the grant
	exp     int64 // record expiry at the grant
	// t is the FSM time of the grant (LeaseExpiresAt - LeaseNs), valid when tKnown.
	t      int64
	tKnown bool
}

// keyOps holds everything the history says about one key.
type keyOps struct {
	key        string
	ops        []*op // client operations, by invocation time
	grants     []*grant
	finalReads []*op
	// leaseLB and expLB raise a grant's lease end and expiry by the answers
	// of extends with its token that returned OK (lower bounds: an
	// indeterminate extend may have pushed them further).
	leaseLB, expLB map[uint64]int64
	byToken        map[uint64]*grant // the first grant of each token
	// released maps each token some release may have used to the earliest
	// invocation of such a release; releaseTokens are its keys, sorted.
	released      map[uint64]int64
	releaseTokens []uint64
}

// parsed is the history split into operations.
type parsed struct {
	keys     []string
	byKey    map[string]*keyOps
	ops      []*op // client operations (not final reads or statuses)
	statuses []*op
	// end is the time of the last event.
	end int64
}

func isClientOp(f string) bool {
	switch f {
	case history.FClaim, history.FComplete, history.FRelease, history.FExtend, history.FCheckpoint, history.FGet, history.FWait:
		return true
	}
	return false
}

// newParsed pairs invocations with completions (by Process and Op) and
// groups the operations by key.
func newParsed(events []history.Event) *parsed {
	h := &parsed{byKey: map[string]*keyOps{}}
	for _, o := range pair(events, h) {
		switch {
		case o.ev.F == history.FFinalStatus:
			h.statuses = append(h.statuses, o)
		case o.ev.F == history.FFinalRead:
			h.key(o.ev.Key).finalReads = append(h.key(o.ev.Key).finalReads, o)
		case isClientOp(o.ev.F):
			h.ops = append(h.ops, o)
			h.key(o.ev.Key).ops = append(h.key(o.ev.Key).ops, o)
		}
	}
	for _, k := range h.byKey {
		h.keys = append(h.keys, k.key)
		k.index()
	}
	sort.Strings(h.keys)
	return h
}

func (h *parsed) key(key string) *keyOps {
	k := h.byKey[key]
	if k == nil {
		k = &keyOps{key: key, leaseLB: map[uint64]int64{}, expLB: map[uint64]int64{},
			byToken: map[uint64]*grant{}, released: map[uint64]int64{}}
		h.byKey[key] = k
	}
	return k
}

type opID struct {
	process int
	op      int64
}

// pair matches completions to invocations. An invocation that never
// completed is indeterminate.
func pair(events []history.Event, h *parsed) []*op {
	pending := map[opID]*op{}
	var out []*op
	for i := range events {
		e := events[i]
		h.end = max(h.end, e.Time)
		id := opID{e.Process, e.Op}
		if e.Type == history.Invoke {
			o := &op{inv: &e, call: e.Time}
			pending[id] = o
			out = append(out, o)
			continue
		}
		o := pending[id]
		if o == nil {
			o = &op{call: e.Time}
			out = append(out, o)
		}
		delete(pending, id)
		o.done = e
		o.ret = e.Time
		if e.Type == history.Info {
			o.ret = never
		}
	}
	for _, o := range pending {
		o.done = *o.inv
		o.done.Type = history.Info
		o.ret = never
		o.open = true
	}
	for _, o := range out {
		o.ev = merge(o.inv, o.done)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].call < out[j].call })
	return out
}

// merge fills the inputs the completion left out from the invocation.
func merge(inv *history.Event, done history.Event) history.Event {
	if inv == nil {
		return done
	}
	e := done
	fill(&e.F, inv.F)
	fill(&e.Key, inv.Key)
	fill(&e.Node, inv.Node)
	fill(&e.Owner, inv.Owner)
	fill(&e.Token, inv.Token)
	fill(&e.Body, inv.Body)
	fill(&e.LeaseNs, inv.LeaseNs)
	fill(&e.TTLNs, inv.TTLNs)
	return e
}

func fill[T comparable](dst *T, v T) {
	var zero T
	if *dst == zero {
		*dst = v
	}
}

// index derives the grants and the extend bounds of the key.
func (k *keyOps) index() {
	type grantID struct {
		owner string
		token uint64
	}
	seen := map[grantID]bool{}
	for _, o := range k.ops {
		e := o.ev
		switch {
		case e.F == history.FClaim && o.is(outWon):
			id := grantID{e.Owner, e.RecToken}
			if seen[id] {
				continue // a retried claim answered with the same grant
			}
			seen[id] = true
			g := &grant{op: o, token: e.RecToken, owner: e.Owner, attempt: e.Attempt,
				lea: e.LeaseExpiresAt, exp: e.ExpiresAt}
			if e.LeaseNs > 0 && e.LeaseExpiresAt > 0 {
				g.t, g.tKnown = e.LeaseExpiresAt-e.LeaseNs, true
			}
			k.grants = append(k.grants, g)
		case e.F == history.FExtend && o.is(outOK) && e.LeaseExpiresAt > 0:
			k.leaseLB[e.Token] = max(k.leaseLB[e.Token], e.LeaseExpiresAt)
			k.expLB[e.Token] = max(k.expLB[e.Token], e.LeaseExpiresAt)
		case e.F == history.FRelease && o.mayHaveHappened():
			if first, ok := k.released[e.Token]; !ok || o.call < first {
				if !ok {
					k.releaseTokens = append(k.releaseTokens, e.Token)
				}
				k.released[e.Token] = o.call
			}
		}
	}
	sort.SliceStable(k.grants, func(i, j int) bool { return k.grants[i].token < k.grants[j].token })
	for _, g := range k.grants {
		if k.byToken[g.token] == nil {
			k.byToken[g.token] = g
		}
	}
	slices.Sort(k.releaseTokens)
}

// mayRelease reports whether a release with a token in [lo, hi) may have
// taken effect before time before. Any release that was not certainly
// refused counts, whatever its answer: a retried release may have deleted
// the record before the answer the client saw (FENCED by a later holder).
func (k *keyOps) mayRelease(lo, hi uint64, before int64) bool {
	i, _ := slices.BinarySearch(k.releaseTokens, lo)
	for ; i < len(k.releaseTokens) && k.releaseTokens[i] < hi; i++ {
		if k.released[k.releaseTokens[i]] <= before {
			return true
		}
	}
	return false
}

// leaseEnd is a lower bound of the lease end of g's record when it ended.
func (k *keyOps) leaseEnd(g *grant) int64 { return max(g.lea, k.leaseLB[g.token]) }

// expiry is a lower bound of the expiry of g's record when it ended.
func (k *keyOps) expiry(g *grant) int64 { return max(g.exp, g.lea, k.expLB[g.token]) }

// owners maps each token a client was told WON to its owner.
func (k *keyOps) owners() map[uint64]string {
	m := make(map[uint64]string, len(k.byToken))
	for t, g := range k.byToken {
		m[t] = g.owner
	}
	return m
}

// counts summarises the parsed history.
func (h *parsed) counts(events int, faults []history.Fault) Counts {
	c := Counts{Events: events, Ops: len(h.ops), Keys: len(h.keys),
		ByType: map[string]int{}, ByFunction: map[string]int{}}
	for _, o := range h.ops {
		c.ByType[o.ev.Type]++
		c.ByFunction[o.ev.F]++
	}
	for _, f := range faults {
		if f.Phase == history.FaultStart {
			c.Faults++
		}
	}
	return c
}
