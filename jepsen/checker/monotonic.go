package checker

import (
	"fmt"
	"sort"

	"github.com/idemnode/idemnode/jepsen/history"
)

// The stale-read checker, a cheap real-time complement to porcupine. A
// record's version (token, then PENDING before COMPLETED) never decreases
// while the record exists, and a new record holds a larger token than every
// earlier one. So once an operation that shows a version has returned, no
// operation invoked later can see an older one. Absent records prove
// nothing (expiry) and are skipped; final reads are checked by lost-write.

// version orders the states of a key's records.
type version struct {
	token uint64
	rank  int // 1 PENDING, 2 COMPLETED
}

func (v version) less(o version) bool {
	return v.token < o.token || v.token == o.token && v.rank < o.rank
}

func (v version) String() string {
	if v.rank == 2 {
		return fmt.Sprintf("COMPLETED token %d", v.token)
	}
	return fmt.Sprintf("PENDING token %d", v.token)
}

// shown returns the version an answered operation proves the record had
// at some point of its interval.
func shown(o *op) (version, bool) {
	e := o.ev
	if !o.answered() {
		return version{}, false
	}
	switch {
	case e.F == history.FClaim && e.Outcome == outWon && e.RecToken != 0:
		return version{e.RecToken, 1}, true
	case e.F == history.FComplete && e.Outcome == outOK && e.Token != 0:
		return version{e.Token, 2}, true
	case e.F == history.FExtend && e.Outcome == outOK && e.Token != 0:
		return version{e.Token, 1}, true
	case e.F == history.FClaim || e.F == history.FGet || e.F == history.FWait:
		switch st := readState(e); {
		case e.RecToken == 0 || st == "":
		case st == "completed":
			return version{e.RecToken, 2}, true
		default:
			return version{e.RecToken, 1}, true
		}
	}
	return version{}, false
}

// checkStaleReads flags claims and reads that saw a version older than one
// shown by an operation that returned before they were invoked.
func checkStaleReads(k *keyOps) []Anomaly {
	type seen struct {
		o *op
		v version
	}
	var all, reads []seen
	for _, o := range k.ops {
		if v, ok := shown(o); ok {
			all = append(all, seen{o, v})
			if o.ev.F != history.FComplete && o.ev.F != history.FExtend { // those are fencing's
				reads = append(reads, seen{o, v})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].o.ret < all[j].o.ret })
	var out []Anomaly
	var newest *seen
	next := 0
	for _, s := range reads { // k.ops is in invocation order
		for ; next < len(all) && all[next].o.ret < s.o.call; next++ {
			if newest == nil || newest.v.less(all[next].v) {
				newest = &all[next]
			}
		}
		if newest != nil && s.v.less(newest.v) {
			out = append(out, Anomaly{Kind: KindStaleRead, Key: k.key,
				Events: append(newest.o.events(), s.o.events()...),
				Explanation: fmt.Sprintf("%s invoked after %s had shown %s saw the older %s",
					s.o.ev.F, newest.o.ev.F, newest.v, s.v)})
		}
	}
	return out
}
