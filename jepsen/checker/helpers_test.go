package checker

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/jepsen/history"
)

// A builder writes histories the way the harness does: an invocation and
// a completion per operation, times in ms since the run began, FSM times
// in seconds after t0.

const (
	ms       = int64(time.Millisecond)
	sec      = int64(time.Second)
	tLease   = 2 * sec
	tTTL     = 10 * sec
	nodeA    = "n1"
	testBody = "body-"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// at returns the FSM time t0 + s seconds.
func at(s float64) int64 { return t0 + int64(s*1e9) }

type builder struct {
	events []history.Event
	op     int64
}

// add appends an operation invoked at call ms and completed at ret ms with
// type typ; ret < 0 leaves the operation open.
func (b *builder) add(call, ret int64, typ string, e history.Event) {
	b.op++
	e.Process, e.Op = int(b.op), b.op
	if e.Node == "" {
		e.Node = nodeA
	}
	inv := history.Event{Type: history.Invoke, Process: e.Process, Op: e.Op, F: e.F, Key: e.Key, Node: e.Node,
		Time: call * ms, Owner: e.Owner, Token: e.Token, Body: e.Body, LeaseNs: e.LeaseNs, TTLNs: e.TTLNs, Point: e.Point}
	b.events = append(b.events, inv)
	if ret < 0 {
		return
	}
	e.Type, e.Time = typ, ret*ms
	if typ != history.OK {
		e = history.Event{Type: typ, Process: e.Process, Op: e.Op, F: e.F, Key: e.Key, Node: e.Node, Time: e.Time,
			Owner: e.Owner, Token: e.Token, Body: e.Body, LeaseNs: e.LeaseNs, TTLNs: e.TTLNs, Point: e.Point, Error: "timeout"}
	}
	b.events = append(b.events, e)
}

func (b *builder) history() []history.Event {
	out := append([]history.Event(nil), b.events...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

func claimEv(key, owner string) history.Event {
	return history.Event{F: history.FClaim, Key: key, Owner: owner, LeaseNs: tLease, TTLNs: tTTL}
}

// won claims key for owner with a fresh grant of token at FSM time T s.
func (b *builder) won(call, ret int64, key, owner string, token uint64, T float64) {
	e := claimEv(key, owner)
	e.Outcome, e.RecToken, e.Attempt = outWon, token, 1
	e.LeaseExpiresAt, e.ExpiresAt = at(T)+tLease, at(T)+max(tTTL, tLease)
	b.add(call, ret, history.OK, e)
}

// takeover claims key by taking over an expired lease at FSM time T s.
func (b *builder) takeover(call, ret int64, key, owner string, token uint64, T float64, attempt uint32, exp int64) {
	e := claimEv(key, owner)
	e.Outcome, e.RecToken, e.Attempt = outWon, token, attempt
	e.LeaseExpiresAt, e.ExpiresAt = at(T)+tLease, max(exp, at(T)+tLease)
	b.add(call, ret, history.OK, e)
}

// claimOut adds a claim answered outcome with the given record fields.
func (b *builder) claimOut(call, ret int64, key, owner, outcome string, rec history.Event) {
	e := claimEv(key, owner)
	e.Outcome, e.RecToken, e.RecBody, e.Attempt = outcome, rec.RecToken, rec.RecBody, rec.Attempt
	e.LeaseExpiresAt, e.ExpiresAt = rec.LeaseExpiresAt, rec.ExpiresAt
	b.add(call, ret, history.OK, e)
}

func (b *builder) claimInfo(call int64, key, owner string) {
	b.add(call, call+5, history.Info, claimEv(key, owner))
}

// write adds a complete, release or extend answered outcome (typ ok) or
// of type typ.
func (b *builder) write(call, ret int64, typ, f, key string, token uint64, outcome string) {
	e := history.Event{F: f, Key: key, Token: token, Outcome: outcome}
	if f == history.FComplete {
		e.Body = body(key, token)
	}
	if f == history.FExtend {
		e.LeaseNs = tLease
	}
	b.add(call, ret, typ, e)
}

// extendTo adds an extend answered OK with lease end lea.
func (b *builder) extendTo(call, ret int64, key string, token uint64, lea int64) {
	b.add(call, ret, history.OK, history.Event{F: history.FExtend, Key: key, Token: token, LeaseNs: tLease,
		Outcome: outOK, LeaseExpiresAt: lea})
}

// checkpointed adds a checkpoint of point "charged" with data by token,
// answered outcome.
func (b *builder) checkpointed(call, ret int64, key string, token uint64, data, outcome string) {
	b.add(call, ret, history.OK, history.Event{F: history.FCheckpoint, Key: key, Token: token, Point: "charged",
		Body: data, Outcome: outcome})
}

func body(key string, token uint64) string { return fmt.Sprintf("%s%s-%d", testBody, key, token) }

// read adds a get (or wait, final-read) answered with a record.
func (b *builder) read(call, ret int64, f, node, key string, rec history.Event) {
	e := rec
	e.F, e.Key, e.Node = f, key, node
	if e.Outcome == "" {
		e.Outcome = outOK
		if e.RecState == "" {
			e.Outcome = outNotFound
		}
	}
	b.add(call, ret, history.OK, e)
}

func pending(token uint64, attempt uint32, lea, exp int64) history.Event {
	return history.Event{RecState: "pending", RecToken: token, Attempt: attempt, LeaseExpiresAt: lea, ExpiresAt: exp}
}

func completed(key string, token uint64, attempt uint32, exp int64) history.Event {
	return history.Event{RecState: "completed", RecToken: token, RecBody: body(key, token), Attempt: attempt, ExpiresAt: exp}
}

func absent() history.Event { return history.Event{} }

// status adds a final status of node.
func (b *builder) status(call int64, node string, index uint64, digest string, fsmTime int64) {
	b.add(call, call+1, history.OK, history.Event{F: history.FFinalStatus, Node: node,
		AppliedIndex: index, Digest: digest, FSMTime: fsmTime})
}

// kinds returns the sorted distinct anomaly kinds of r.
func kinds(r Report) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range r.Anomalies {
		if !seen[a.Kind] {
			seen[a.Kind] = true
			out = append(out, a.Kind)
		}
	}
	sort.Strings(out)
	return out
}

func check(t *testing.T, b *builder, opts Options) Report {
	t.Helper()
	if opts.LinearizabilityTimeout == 0 {
		opts.LinearizabilityTimeout = 20 * time.Second
	}
	return Check(b.history(), nil, opts)
}

// wantKinds fails unless the report holds exactly the kinds want.
func wantKinds(t *testing.T, r Report, want ...string) {
	t.Helper()
	sort.Strings(want)
	got := kinds(r)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("anomaly kinds = %v, want %v\n%s", got, want, r.Summary())
	}
}
