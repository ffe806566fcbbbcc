package checker

import (
	"fmt"
	"math/rand/v2"

	"github.com/idemnode/idemnode/jepsen/history"
)

// sim is a correct server: a sequential simulator of the apply rules of
// fsm/apply.go with a fake FSM clock, emitting a history as the harness
// would record it. Commands apply in log order, one every few real-time
// µs; each operation's invocation and completion are spread around its
// application so that operations overlap. Some operations are
// indeterminate (applied or not), some reads fail, and some writes are
// applied twice, the way a forwarded or SDK-retried request is: the client
// sees the answer of the second application only.
type sim struct {
	rng   *rand.Rand
	now   int64 // FSM time
	index uint64
	recs  map[string]*simRec
	// real is the real time (ns since the run began) of the next application.
	real   int64
	events []history.Event
	op     int64
	// told lists the grants clients were told, per key.
	told map[string][]simGrant
	// spread bounds the real time between an invocation and its
	// application, and between the application and the completion.
	spread int64
	// infoPct and retryPct are the percentages of indeterminate and
	// retried operations; a key is replaced once in keyLife operations.
	infoPct, retryPct, keyLife int
	// bug plants a server bug (see the bug constants), "" for none.
	bug string
	// stale is an old copy of the records, served by the stale-reads bug.
	stale   map[string]simRec
	keys    []string
	nextKey int
	retries []retry
}

type simRec struct {
	done     bool
	owner    string
	token    uint64
	attempt  uint32
	lea, exp int64
	body     string
}

type simGrant struct {
	token uint64
	owner string
}

// retry is a write applied once already, to be applied again at step due.
type retry struct {
	e    history.Event
	call int64
	due  int
}

// Planted bugs, as rpc/bugs_faults.go plants them in the server.
const (
	// bugSkipFencing completes a PENDING record whatever the token.
	bugSkipFencing = "skip-fencing"
	// bugStaleReads serves some gets and waits from an old state.
	bugStaleReads = "stale-reads"
	// bugEarlyTakeover takes a lease over 500 ms before it ends.
	bugEarlyTakeover = "early-takeover"
)

func newSim(seed uint64) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: t0,
		recs: map[string]*simRec{}, told: map[string][]simGrant{}, spread: 6 * ms,
		infoPct: 10, retryPct: 10, keyLife: 50}
	for range 3 {
		s.freshKey()
	}
	return s
}

func (s *sim) freshKey() string {
	s.nextKey++
	k := fmt.Sprintf("key-%d", s.nextKey)
	s.keys = append(s.keys, k)
	return k
}

// tick is one log entry: FSM time moves by the command's now, mostly a
// little, sometimes past leases and TTLs (other keys' commands, a leader
// whose clock runs ahead).
func (s *sim) tick() uint64 {
	s.index++
	switch r := s.rng.IntN(100); {
	case r < 5:
		s.now += (1 + s.rng.Int64N(8)) * sec
	case r < 80:
		s.now += s.rng.Int64N(300 * ms)
	}
	return s.index << 16
}

// readable is the record a read sees.
func (s *sim) readable(e *history.Event) *simRec {
	if s.bug != bugStaleReads || e.F == history.FFinalRead || s.rng.IntN(2) == 0 {
		return s.live(e.Key)
	}
	if r, ok := s.stale[e.Key]; ok && r.exp > s.now {
		return &r
	}
	return nil
}

func (s *sim) live(key string) *simRec {
	if r := s.recs[key]; r != nil && r.exp > s.now {
		return r
	}
	return nil
}

// apply runs one command and fills the answer into e.
func (s *sim) apply(e *history.Event) {
	e.Outcome, e.RecToken, e.RecState, e.RecBody, e.Attempt, e.LeaseExpiresAt, e.ExpiresAt = "", 0, "", "", 0, 0, 0
	if e.F == history.FGet || e.F == history.FWait || e.F == history.FFinalRead {
		s.read(e, s.readable(e)) // reads are no log entries: FSM time stays
		return
	}
	if s.bug == bugStaleReads && s.rng.IntN(10) == 0 {
		s.stale = map[string]simRec{}
		for k, r := range s.recs {
			s.stale[k] = *r
		}
	}
	token := s.tick()
	r := s.live(e.Key)
	switch e.F {
	case history.FClaim:
		s.claim(e, r, token)
	case history.FComplete:
		s.complete(e, r)
	case history.FRelease:
		switch {
		case r == nil:
			e.Outcome = outOK
		case r.token != e.Token || r.done:
			e.Outcome = outFenced
		default:
			delete(s.recs, e.Key)
			e.Outcome = outOK
		}
	case history.FExtend:
		switch {
		case r == nil:
			e.Outcome = outNotFound
		case r.token != e.Token || r.done:
			e.Outcome = outFenced
		default:
			r.lea = max(r.lea, s.now+e.LeaseNs)
			r.exp = max(r.exp, r.lea)
			e.Outcome, e.LeaseExpiresAt = outOK, r.lea
		}
	}
}

func (s *sim) claim(e *history.Event, r *simRec, token uint64) {
	switch {
	case r == nil:
		r = &simRec{owner: e.Owner, token: token, attempt: 1, lea: s.now + e.LeaseNs,
			exp: max(s.now+e.TTLNs, s.now+e.LeaseNs)}
		s.recs[e.Key] = r
	case r.done:
		e.Outcome, e.RecToken, e.RecBody, e.Attempt, e.ExpiresAt = outCompleted, r.token, r.body, r.attempt, r.exp
		return
	case r.owner == e.Owner:
	case r.lea > s.now && (s.bug != bugEarlyTakeover || r.lea > s.now+500*ms):
		e.Outcome, e.Attempt, e.LeaseExpiresAt, e.ExpiresAt = outInProgress, r.attempt, r.lea, r.exp
		return
	default:
		lea := s.now + e.LeaseNs
		r = &simRec{owner: e.Owner, token: token, attempt: r.attempt + 1, lea: lea, exp: max(r.exp, lea)}
		s.recs[e.Key] = r
	}
	e.Outcome, e.RecToken, e.Attempt, e.LeaseExpiresAt, e.ExpiresAt = outWon, r.token, r.attempt, r.lea, r.exp
}

func (s *sim) complete(e *history.Event, r *simRec) {
	switch {
	case r == nil:
		e.Outcome = outNotFound
	case r.token != e.Token && (s.bug != bugSkipFencing || r.done):
		e.Outcome = outFenced
	case r.done && r.body == e.Body:
		e.Outcome = outOK
	case r.done:
		e.Outcome = outMismatch
	default:
		r.done, r.body, r.lea = true, e.Body, 0
		e.Outcome = outOK
	}
}

func (s *sim) read(e *history.Event, r *simRec) {
	if r == nil {
		e.Outcome = outNotFound
		return
	}
	e.RecToken, e.Attempt, e.ExpiresAt = r.token, r.attempt, r.exp
	if r.done {
		e.RecState, e.RecBody, e.Outcome = "completed", r.body, outOK
		if e.F == history.FWait {
			e.Outcome = outCompleted
		}
		return
	}
	e.RecState, e.LeaseExpiresAt, e.Outcome = "pending", r.lea, outOK
	if e.F == history.FWait {
		e.Outcome = outInProgress
	}
}

// request picks the next operation of a client.
func (s *sim) request() history.Event {
	if s.rng.IntN(s.keyLife) == 0 {
		s.keys = s.keys[1:]
		s.freshKey()
	}
	key := s.keys[s.rng.IntN(len(s.keys))]
	s.op++
	e := history.Event{Process: int(s.op), Op: s.op, Key: key, Node: fmt.Sprintf("n%d", 1+s.rng.IntN(3))}
	told := s.told[key]
	r := s.rng.IntN(100)
	switch {
	case r < 30 || len(told) == 0:
		e.F, e.Owner = history.FClaim, fmt.Sprintf("o%d", s.op)
		e.LeaseNs, e.TTLNs = (1+s.rng.Int64N(2))*sec, (3+s.rng.Int64N(6))*sec
		return e
	case r < 60:
		e.F = history.FGet
		if r < 45 {
			e.F = history.FWait
		}
		return e
	}
	g := told[len(told)-1]
	if s.rng.IntN(4) == 0 {
		g = told[s.rng.IntN(len(told))]
	}
	e.Token = g.token
	switch {
	case r < 82:
		e.F, e.Body = history.FComplete, fmt.Sprintf("b-%s-%d", g.owner, g.token)
	case r < 91:
		e.F = history.FRelease
	default:
		e.F, e.LeaseNs = history.FExtend, (1+s.rng.Int64N(2))*sec
	}
	return e
}

// emit records an operation invoked at call whose (last) application is
// now, answered with e of type typ; ret < 0 leaves it open.
func (s *sim) emit(e history.Event, call int64, typ string, open bool) {
	inv := history.Event{Type: history.Invoke, Process: e.Process, Op: e.Op, F: e.F, Key: e.Key, Node: e.Node,
		Time: call, Owner: e.Owner, Token: e.Token, Body: e.Body, LeaseNs: e.LeaseNs, TTLNs: e.TTLNs}
	s.events = append(s.events, inv)
	if open {
		return
	}
	done := e
	done.Type, done.Time = typ, s.real+s.rng.Int64N(s.spread)
	if typ != history.OK {
		done = inv
		done.Type, done.Time, done.Error = typ, s.real+s.rng.Int64N(s.spread), "deadline exceeded"
	}
	s.events = append(s.events, done)
	if e.F == history.FClaim && e.Outcome == outWon && typ == history.OK {
		s.told[e.Key] = append(s.told[e.Key], simGrant{e.RecToken, e.Owner})
	}
}

// step runs one operation (or the second application of a retried one).
func (s *sim) step(i int) {
	s.real += 1 + s.rng.Int64N(2*ms)
	for j, r := range s.retries {
		if r.due <= i {
			s.retries = append(s.retries[:j], s.retries[j+1:]...)
			s.apply(&r.e)
			s.emit(r.e, r.call, history.OK, false)
			return
		}
	}
	e := s.request()
	call := max(0, s.real-s.rng.Int64N(s.spread))
	read := e.F == history.FGet || e.F == history.FWait
	switch r := s.rng.IntN(100); {
	case r < 5 && read:
		s.emit(e, call, history.Fail, false)
	case r < s.infoPct: // indeterminate: applied or not
		if s.rng.IntN(2) == 0 {
			s.apply(&e)
		}
		s.emit(e, call, history.Info, s.rng.IntN(5) == 0)
	case r < s.infoPct+s.retryPct && !read: // applied now, answered by a later retry
		s.apply(&e)
		s.retries = append(s.retries, retry{e: e, call: call, due: i + 1 + s.rng.IntN(8)})
	default:
		s.apply(&e)
		s.emit(e, call, history.OK, false)
	}
}

// finish heals the cluster: retries complete, every node reads every key
// (stale reads of one converged state) and then reports its status.
func (s *sim) finish(steps int) {
	for len(s.retries) > 0 {
		s.step(steps + 100)
	}
	s.real += sec
	var keys []string
	for i := 1; i <= s.nextKey; i++ {
		keys = append(keys, fmt.Sprintf("key-%d", i))
	}
	for n := 1; n <= 3; n++ {
		node := fmt.Sprintf("n%d", n)
		for _, k := range keys {
			s.op++
			e := history.Event{Process: int(s.op), Op: s.op, F: history.FFinalRead, Key: k, Node: node}
			s.apply(&e)
			s.emit(e, s.real, history.OK, false)
		}
	}
	s.real += sec
	for n := 1; n <= 3; n++ {
		s.op++
		e := history.Event{Process: int(s.op), Op: s.op, F: history.FFinalStatus, Node: fmt.Sprintf("n%d", n),
			AppliedIndex: s.index, Digest: "digest", FSMTime: s.now}
		s.emit(e, s.real, history.OK, false)
	}
}

// run returns a random history of about steps operations.
func (s *sim) run(steps int) []history.Event {
	for i := range steps {
		s.step(i)
	}
	s.finish(steps)
	return s.events
}
