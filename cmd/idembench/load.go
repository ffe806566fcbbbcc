package main

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// window is the measured interval. Only requests that start after the
// warm-up and finish before the end count.
type window struct {
	start, end time.Time
	timeout    time.Duration // per operation
	lease      time.Duration // of the load's claims
}

func (w window) in(s, e time.Time) bool { return !s.Before(w.start) && !e.After(w.end) }

// errorPause keeps a client that gets errors (a node down, a timeout) from
// spinning; bench-peers pauses the same 5 ms.
const errorPause = 5 * time.Millisecond

// recorder is what one client (or one race group) counted. Each has its own,
// merged after the run, so the load loops share nothing.
type recorder struct {
	lat, claimLat, completeLat []time.Duration
	requests, storeOps         int64
	errors                     int64
	errSample                  string
	lost, casFailed            int64

	raceKeys, raceViol, raceIndet int64
	raceWins                      []raceWin
}

func (r *recorder) err(e error) {
	r.errors++
	if r.errSample == "" {
		r.errSample = e.Error()
	}
}

func (r *recorder) merge(o *recorder) {
	r.lat = append(r.lat, o.lat...)
	r.claimLat = append(r.claimLat, o.claimLat...)
	r.completeLat = append(r.completeLat, o.completeLat...)
	r.requests += o.requests
	r.storeOps += o.storeOps
	r.errors += o.errors
	if r.errSample == "" {
		r.errSample = o.errSample
	}
	r.lost += o.lost
	r.casFailed += o.casFailed
	r.raceKeys += o.raceKeys
	r.raceViol += o.raceViol
	r.raceIndet += o.raceIndet
	r.raceWins = append(r.raceWins, o.raceWins...)
}

// call runs one RPC under the per-operation timeout.
func call[Req, Resp any](ctx context.Context, timeout time.Duration, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx, req)
}

// uniqueOp is one logical request of the claim and claim+complete modes.
type uniqueOp struct {
	s, mid, e    time.Time
	won          bool
	claimErr     error
	completeErr  error
	completeDone bool // Complete ran and answered
	completeOK   bool
}

// uniqueClient claims fresh random keys one after another (closed loop) and,
// in claim+complete mode, completes each won key with its token.
func uniqueClient(ctx context.Context, c idempb.IdempotencyClient, w window, prefix string, complete bool, id uint64, r *recorder) {
	rng := newRNG()
	body := responseBody(id)
	for ctx.Err() == nil && time.Now().Before(w.end) {
		key := randomKey(prefix, rng)
		op := uniqueOp{s: time.Now()}
		req := claimRequest(key, fingerprint(key, 0), newOwner(rng))
		req.Lease = durationpb.New(w.lease)
		cl, err := call(ctx, w.timeout, c.Claim, req)
		op.mid, op.claimErr = time.Now(), err
		op.won = err == nil && cl.GetOutcome() == idempb.Outcome_OUTCOME_WON
		if complete && op.won {
			co, err := call(ctx, w.timeout, c.Complete, completeRequest(key, cl.GetToken(), body))
			op.completeErr, op.completeDone = err, err == nil
			op.completeOK = co.GetOutcome() == idempb.Outcome_OUTCOME_OK
		}
		op.e = time.Now()
		if w.in(op.s, op.e) {
			r.addUnique(op, complete)
		}
		if op.claimErr != nil || op.completeErr != nil {
			time.Sleep(errorPause)
		}
	}
}

// addUnique counts one request as bench-peers does: an errored request is an
// error and nothing else; a fresh key that did not win is unexpected_lost,
// a won key whose Complete was not OK is cas_failed; both still count as
// requests with their latency.
func (r *recorder) addUnique(op uniqueOp, complete bool) {
	switch {
	case op.claimErr != nil:
		r.err(op.claimErr)
		return
	case complete && op.completeErr != nil:
		r.err(op.completeErr)
		return
	case !op.won:
		r.lost++
	case complete && !op.completeOK:
		r.casFailed++
	}
	r.requests++
	r.storeOps++
	r.lat = append(r.lat, op.e.Sub(op.s))
	if complete && op.completeDone {
		r.storeOps++
		r.claimLat = append(r.claimLat, op.mid.Sub(op.s))
		r.completeLat = append(r.completeLat, op.e.Sub(op.mid))
	}
}
