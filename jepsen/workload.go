package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idemnode/idemnode/jepsen/history"
	"github.com/idemnode/idemnode/rpc/idempb"
)

const (
	tenant = "jepsen"
	scope  = "POST /v1/charges"
	// opTimeout bounds every call; a write that times out is indeterminate.
	opTimeout = 2 * time.Second
)

func recordID(key string) *idempb.RecordId {
	return &idempb.RecordId{Tenant: tenant, Scope: scope, Key: key}
}

// fingerprint is fixed per key: every claim of a key is the same request,
// so a MISMATCH is always an anomaly.
func fingerprint(key string) []byte { return []byte("fp:" + key) }

func outcomeName(o idempb.Outcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}

func fillRecord(e *history.Event, r *idempb.Record) {
	if r == nil {
		return
	}
	e.RecToken = r.Token
	e.RecState = strings.ToLower(strings.TrimPrefix(r.State.String(), "STATE_"))
	e.Attempt = r.Attempt
	e.LeaseExpiresAt, e.ExpiresAt = nanos(r.LeaseExpiresAt), nanos(r.ExpiresAt)
	if r.Response != nil {
		e.RecBody = string(r.Response.Body)
	}
}

// keySpace hands out hot keys: a small set shared by every client, replaced
// by a fresh set every opsPerGen operations so per-key histories stay short
// enough to check.
type keySpace struct {
	hot       int
	opsPerGen int64
	ops       atomic.Int64

	// mu guards seen.
	mu   sync.Mutex
	seen map[string]bool
}

func (k *keySpace) pick(r *rand.Rand) string {
	key := keyName(k.ops.Add(1)/k.opsPerGen, r.IntN(k.hot))
	k.mu.Lock()
	k.seen[key] = true
	k.mu.Unlock()
	return key
}

// keyName is the i-th hot key of key set gen.
func keyName(gen int64, i int) string { return fmt.Sprintf("g%d-k%d", gen, i) }

func (k *keySpace) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.seen))
	for key := range k.seen {
		out = append(out, key)
	}
	return out
}

// worker is one client process of the workload, bound to one node.
type worker struct {
	process int
	node    *node
	keys    *keySpace
	hist    *history.Writer
	clock   func() int64
	minTTL  time.Duration // shortest TTL a claim asks for
	opSeq   *atomic.Int64
	rng     *rand.Rand
	// failed is set when the last operation ended in an error, so the next
	// one backs off like a real client instead of spinning on a dead node.
	failed bool
}

// holding is a claim this worker won and has not finished.
type holding struct {
	key   string
	owner string
	token uint64
	lease time.Duration
}

// run issues operations until ctx ends.
func (w *worker) run(ctx context.Context) {
	var held *holding
	for ctx.Err() == nil {
		if w.failed {
			w.failed = false
			sleep(ctx, time.Duration(20+w.rng.IntN(80))*time.Millisecond)
		}
		if held != nil {
			held = w.finish(ctx, held)
			continue
		}
		key := w.keys.pick(w.rng)
		switch p := w.rng.Float64(); {
		case p < 0.6:
			held = w.claim(ctx, key)
		case p < 0.85:
			w.get(ctx, key)
		default:
			w.wait(ctx, key)
		}
	}
}

// finish does what a holder does next: usually complete, sometimes release,
// extend, record a recovery point, stall past its lease (so another client
// takes over and the stale completion must be fenced), or abandon the
// claim. A release after a recovery point keeps the record for the next
// claim, which resumes from the point.
func (w *worker) finish(ctx context.Context, h *holding) *holding {
	switch p := w.rng.Float64(); {
	case p < 0.47:
		w.complete(ctx, h)
	case p < 0.57:
		w.release(ctx, h)
	case p < 0.67:
		w.extend(ctx, h)
		return h
	case p < 0.75:
		w.checkpoint(ctx, h)
		return h
	case p < 0.9:
		sleep(ctx, h.lease+h.lease/2)
		w.complete(ctx, h)
	default: // abandon: the lease runs out and someone takes over
	}
	return nil
}

func (w *worker) begin(f, key string) history.Event {
	node := w.node.id
	return history.Event{Type: history.Invoke, Process: w.process, Op: w.opSeq.Add(1), F: f, Key: key, Node: node}
}

// record writes the invocation now and returns a function that writes the
// completion; err classifies it as ok, fail or info.
func (w *worker) record(e history.Event) func(out history.Event, err error) {
	e.Time = w.clock()
	_ = w.hist.Add(e)
	return func(out history.Event, err error) {
		out.Type, out.Process, out.Op, out.F, out.Key, out.Node = history.OK, e.Process, e.Op, e.F, e.Key, e.Node
		out.Owner, out.Token, out.Body, out.LeaseNs, out.TTLNs, out.Point = e.Owner, e.Token, e.Body, e.LeaseNs, e.TTLNs, e.Point
		out.Time = w.clock()
		if err != nil {
			out.Type, out.Error = classify(e.F, err), err.Error()
			w.failed = true
		}
		_ = w.hist.Add(out)
	}
}

// classify: a read that failed did not happen; a write that failed may have
// happened, unless the server refused it as invalid or the request never
// left the client (no connection to the node could be made).
func classify(f string, err error) string {
	if f == history.FGet || f == history.FWait || status.Code(err) == codes.InvalidArgument || neverSent(err) {
		return history.Fail
	}
	return history.Info
}

// neverSent recognises gRPC's errors for a call that found no transport:
// the dial failed, or the server closed the connection before its preface.
func neverSent(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	msg := st.Message()
	return strings.Contains(msg, "Error while dialing") || strings.Contains(msg, "error reading server preface")
}

// call records invocation e, runs do against the worker's node within
// opTimeout, and records the completion that do filled in (or the error).
func (w *worker) call(ctx context.Context, e history.Event, do func(context.Context, idempb.IdempotencyClient, *history.Event) error) {
	done := w.record(e)
	var out history.Event
	conn, err := w.node.client()
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		err = do(cctx, idempb.NewIdempotencyClient(conn), &out)
		cancel()
	}
	done(out, err)
}

func (w *worker) claim(ctx context.Context, key string) *holding {
	lease := time.Duration(300+w.rng.IntN(1200)) * time.Millisecond
	ttl := w.minTTL + time.Duration(w.rng.IntN(20))*time.Second
	e := w.begin(history.FClaim, key)
	e.Owner = fmt.Sprintf("p%d-op%d", w.process, e.Op)
	e.LeaseNs, e.TTLNs = int64(lease), int64(ttl)
	var won *holding
	w.call(ctx, e, func(ctx context.Context, api idempb.IdempotencyClient, out *history.Event) error {
		resp, err := api.Claim(ctx, &idempb.ClaimRequest{Id: recordID(key), Fingerprint: fingerprint(key),
			Owner: e.Owner, Lease: durationpb.New(lease), Ttl: durationpb.New(ttl)})
		if err != nil {
			return err
		}
		out.Outcome, out.RecToken, out.Attempt = outcomeName(resp.Outcome), resp.Token, resp.Attempt
		out.LeaseExpiresAt, out.ExpiresAt = nanos(resp.LeaseExpiresAt), nanos(resp.ExpiresAt)
		if resp.Response != nil {
			out.RecBody = string(resp.Response.Body)
		}
		if p := resp.GetRecoveryPoint(); p != nil {
			out.RecPoint = p.GetName() + "=" + string(p.GetData())
		}
		if resp.Outcome == idempb.Outcome_OUTCOME_WON {
			won = &holding{key: key, owner: e.Owner, token: resp.Token, lease: lease}
		}
		return nil
	})
	return won
}

// nanos is a record time in Unix nanoseconds, 0 when absent.
func nanos(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.AsTime().UnixNano()
}

// holderEvent is the invocation of an operation by the holder of h.
func (w *worker) holderEvent(f string, h *holding) history.Event {
	e := w.begin(f, h.key)
	e.Token, e.Owner = h.token, h.owner
	return e
}

func (w *worker) complete(ctx context.Context, h *holding) {
	e := w.holderEvent(history.FComplete, h)
	e.Body = fmt.Sprintf(`{"by":%q,"token":%d}`, h.owner, h.token)
	w.call(ctx, e, func(ctx context.Context, api idempb.IdempotencyClient, out *history.Event) error {
		resp, err := api.Complete(ctx, &idempb.CompleteRequest{Id: recordID(h.key), Token: h.token,
			Response: &idempb.Response{Status: 201, Body: []byte(e.Body)}})
		if err == nil {
			out.Outcome = outcomeName(resp.Outcome)
		}
		return err
	})
}

// checkpoint records a step: mostly the holder's own (its data names the
// holder), sometimes again with the same data (a retry), or with other
// data under the same name (a MISMATCH when one is stored).
func (w *worker) checkpoint(ctx context.Context, h *holding) {
	e := w.holderEvent(history.FCheckpoint, h)
	e.Point = "charged"
	e.Body = fmt.Sprintf("by=%s token=%d", h.owner, h.token)
	if w.rng.IntN(5) == 0 {
		e.Body += fmt.Sprintf(" op=%d", e.Op)
	}
	w.call(ctx, e, func(ctx context.Context, api idempb.IdempotencyClient, out *history.Event) error {
		resp, err := api.Checkpoint(ctx, &idempb.CheckpointRequest{Id: recordID(h.key), Token: h.token,
			Point: e.Point, Data: []byte(e.Body)})
		if err == nil {
			out.Outcome = outcomeName(resp.Outcome)
		}
		return err
	})
}

func (w *worker) release(ctx context.Context, h *holding) {
	w.call(ctx, w.holderEvent(history.FRelease, h), func(ctx context.Context, api idempb.IdempotencyClient, out *history.Event) error {
		resp, err := api.Release(ctx, &idempb.ReleaseRequest{Id: recordID(h.key), Token: h.token})
		if err == nil {
			out.Outcome = outcomeName(resp.Outcome)
		}
		return err
	})
}

func (w *worker) extend(ctx context.Context, h *holding) {
	e := w.holderEvent(history.FExtend, h)
	e.LeaseNs = int64(h.lease)
	w.call(ctx, e, func(ctx context.Context, api idempb.IdempotencyClient, out *history.Event) error {
		resp, err := api.Extend(ctx, &idempb.ExtendRequest{Id: recordID(h.key), Token: h.token, Lease: durationpb.New(h.lease)})
		if err == nil {
			out.Outcome, out.LeaseExpiresAt = outcomeName(resp.Outcome), nanos(resp.LeaseExpiresAt)
		}
		return err
	})
}

func (w *worker) get(ctx context.Context, key string) {
	w.call(ctx, w.begin(history.FGet, key), func(ctx context.Context, api idempb.IdempotencyClient, out *history.Event) error {
		resp, err := api.Get(ctx, &idempb.GetRequest{Id: recordID(key)})
		if err == nil {
			out.Outcome = outcomeName(resp.Outcome)
			fillRecord(out, resp.Record)
		}
		return err
	})
}

func (w *worker) wait(ctx context.Context, key string) {
	timeout := time.Duration(100+w.rng.IntN(400)) * time.Millisecond
	w.call(ctx, w.begin(history.FWait, key), func(ctx context.Context, api idempb.IdempotencyClient, out *history.Event) error {
		resp, err := api.Wait(ctx, &idempb.WaitRequest{Id: recordID(key), Timeout: durationpb.New(timeout)})
		if err == nil {
			out.Outcome = outcomeName(resp.Outcome)
			fillRecord(out, resp.Record)
		}
		return err
	})
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
