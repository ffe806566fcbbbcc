package checker

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemnode/idemnode/jepsen/history"
)

// The linearizability checker: porcupine per key with the model of
// model.go. What goes in:
//   - writes answered by the server, over [invocation, completion];
//   - indeterminate writes, over [invocation, end of history], with an
//     unknown answer: they may or may not have happened;
//   - gets and waits answered by the server; failed and indeterminate reads
//     are dropped;
//   - a ghost for every write whose answer may hide an earlier application
//     of the same request (the server forwards and the SDK retries a
//     request within one call) that others could observe: every claim (an
//     earlier grant may have been taken over before the answer), every
//     extend (others may see the lease end of the first application), a
//     complete answered FENCED or NOT_FOUND, a release answered FENCED. A
//     ghost is the same request with an unknown answer over the same
//     interval. A complete or release answered OK needs none: linearized
//     at its first application it explains every observation.
//     One ghost covers one extra application; a request applied three
//     times with two different intermediate states observed is not covered.
// Final reads are stale by design and are checked by lost-write instead.

// opMeta identifies a porcupine operation in visualisations and reports.
type opMeta struct {
	op    *op
	ghost bool
}

func (m *opMeta) String() string {
	e := m.op.ev
	s := fmt.Sprintf("process %d op %d node %s %s", e.Process, e.Op, nodeName(e), e.Type)
	if e.Error != "" {
		s += " error: " + e.Error
	}
	if m.ghost {
		s += " (ghost)"
	}
	return s
}

func outputOf(o *op) output {
	e := o.ev
	if !o.answered() {
		return output{}
	}
	return output{known: true, outcome: e.Outcome, state: readState(e), token: e.RecToken,
		body: e.RecBody, point: e.RecPoint, attempt: e.Attempt, lea: e.LeaseExpiresAt, exp: e.ExpiresAt}
}

// needsGhost reports whether o's answer may hide an earlier application.
func needsGhost(o *op) bool {
	if !o.answered() {
		return false
	}
	switch out := o.ev.Outcome; o.ev.F {
	case history.FClaim, history.FExtend:
		return true
	case history.FComplete, history.FCheckpoint:
		return out == outFenced || out == outNotFound
	case history.FRelease:
		return out == outFenced
	}
	return false
}

// keyHistory builds the porcupine operations of one key, with ghosts or
// without; end stands for the return time of indeterminate operations.
func keyHistory(k *keyOps, end int64, ghosts bool) []porcupine.Operation {
	var ops []porcupine.Operation
	var slots slotter
	for i := range slots.end {
		slots.end[i] = -1
	}
	for _, o := range k.ops {
		e := o.ev
		read := e.F == history.FGet || e.F == history.FWait
		if read && !o.answered() || !o.mayHaveHappened() {
			continue
		}
		in := input{f: e.F, owner: e.Owner, token: e.Token, body: e.Body, lease: e.LeaseNs, ttl: e.TTLNs, slot: -1}
		if e.F == history.FCheckpoint {
			in.body = e.Point + "=" + e.Body // as a claim shows it (RecPoint)
		}
		ret := min(o.ret, end)
		if ghosts && needsGhost(o) {
			in.slot = slots.take(o.call, ret)
			g := in
			g.ghost = true
			ops = append(ops, porcupine.Operation{Input: g, Output: output{}, Call: o.call, Return: ret,
				Metadata: &opMeta{op: o, ghost: true}})
		}
		ops = append(ops, porcupine.Operation{Input: in, Output: outputOf(o), Call: o.call, Return: ret,
			Metadata: &opMeta{op: o}})
	}
	assignLanes(ops)
	return ops
}

// slotter numbers concurrent ghosted operations 0..63 (interval colouring
// over calls in increasing order); beyond 64 at once, -1: that ghost may
// then also be linearized after its operation, which is merely weaker.
type slotter struct{ end [64]int64 }

func (s *slotter) take(call, ret int64) int {
	for i, e := range s.end {
		if e < call {
			s.end[i] = ret
			return i
		}
	}
	return -1
}

// assignLanes numbers clients so that one lane's operations never overlap:
// a compact visualisation whatever the harness's process numbers.
func assignLanes(ops []porcupine.Operation) {
	var laneEnd []int64
	for i := range ops {
		lane := -1
		for l, end := range laneEnd {
			if end < ops[i].Call {
				lane = l
				break
			}
		}
		if lane < 0 {
			lane = len(laneEnd)
			laneEnd = append(laneEnd, 0)
		}
		laneEnd[lane] = ops[i].Return
		ops[i].ClientId = lane
	}
}

type linResult struct {
	key     string
	anomaly *Anomaly
	warning *Anomaly
}

// checkLinearizable runs porcupine on every key, in parallel.
func checkLinearizable(h *parsed, opts Options) (anomalies, warnings []Anomaly, okKeys int) {
	results := make([]linResult, len(h.keys))
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = checkKey(h.byKey[h.keys[i]], h.end+1, opts)
			}
		}()
	}
	for i := range h.keys {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, r := range results {
		switch {
		case r.anomaly != nil:
			anomalies = append(anomalies, *r.anomaly)
		case r.warning != nil:
			warnings = append(warnings, *r.warning)
		default:
			okKeys++
		}
	}
	return anomalies, warnings, okKeys
}

// checkKey checks one key in two phases. Ghosts only add behaviours, so a
// history linearizable without them is linearizable with them: the first
// phase, without ghosts and on a short budget (refuting is the expensive
// direction, and only Ok is used), settles almost every correct key; a key
// it does not is checked again with ghosts, and only that verdict counts.
func checkKey(k *keyOps, end int64, opts Options) linResult {
	r := linResult{key: k.key}
	owners := k.owners()
	plain, ops := keyHistory(k, end, false), keyHistory(k, end, true)
	if len(ops) == 0 {
		return r
	}
	if len(plain) < len(ops) {
		// A model of its own: a timed-out check may still be stepping.
		quick := min(opts.LinearizabilityTimeout, max(opts.LinearizabilityTimeout/10, time.Second))
		first := (&keyModel{owners: owners}).porcupine()
		if porcupine.CheckOperationsTimeout(first, plain, quick) == porcupine.Ok {
			return r
		}
	}
	model := (&keyModel{owners: owners}).porcupine()
	res, info := porcupine.CheckOperationsVerbose(model, ops, opts.LinearizabilityTimeout)
	switch res {
	case porcupine.Unknown:
		r.warning = &Anomaly{Kind: KindLinearizabilityTimeout, Key: k.key,
			Explanation: fmt.Sprintf("porcupine gave up after %s on %d operations (with retried requests' ghosts)",
				opts.LinearizabilityTimeout, len(ops))}
	case porcupine.Illegal:
		a := illegal(k.key, ops, info)
		if opts.VisualizeDir != "" {
			path := filepath.Join(opts.VisualizeDir, fileName(k.key)+".html")
			if err := visualize(model, info, path); err != nil {
				a.Explanation += fmt.Sprintf(" (visualisation failed: %v)", err)
			} else {
				a.Explanation += " (see " + path + ")"
			}
		}
		r.anomaly = &a
	}
	return r
}

// illegal describes a non-linearizable key by the first operation that no
// linearization of the longest linearizable prefix can take.
func illegal(key string, ops []porcupine.Operation, info porcupine.LinearizationInfo) Anomaly {
	in := map[*opMeta]bool{}
	longest := 0
	if parts := info.PartialLinearizationsOperations(); len(parts) > 0 {
		for _, lin := range parts[0] {
			if len(lin) <= longest {
				continue
			}
			longest = len(lin)
			clear(in)
			for _, o := range lin {
				in[o.Metadata.(*opMeta)] = true
			}
		}
	}
	var stuck *porcupine.Operation
	for i := range ops {
		md := ops[i].Metadata.(*opMeta)
		if in[md] || md.ghost {
			continue
		}
		if stuck == nil || ops[i].Return < stuck.Return {
			stuck = &ops[i]
		}
	}
	a := Anomaly{Kind: KindNonLinearizable, Key: key,
		Explanation: fmt.Sprintf("no linearization: at most %d of %d operations linearize", longest, len(ops))}
	if stuck != nil {
		a.Events = stuck.Metadata.(*opMeta).op.events()
		a.Explanation += "; stuck at " + describeOp(stuck.Input, stuck.Output)
	}
	return a
}

func visualize(model porcupine.Model, info porcupine.LinearizationInfo, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return fmt.Errorf("visualize %s: %w", path, err)
	}
	return nil
}

// fileName makes a key safe as a file name.
func fileName(key string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, key)
	if name != key || name == "" || name[0] == '.' {
		// Keep distinct keys apart after the replacement.
		name = fmt.Sprintf("key%s-%08x", name, crc32.ChecksumIEEE([]byte(key)))
	}
	return name
}
