package rpc

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemnode/idemnode/clock"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// forwardService serves idem.v1.Forward: the leader's end of the streams
// followers forward their clients' calls over.
type forwardService struct {
	idempb.UnimplementedForwardServer
	s *Server
}

// Calls runs the calls of the stream concurrently, through the same
// handlers a client call takes (marked forwarded, so they never travel
// on), and sends the replies back as they complete, batched like the calls.
//
// Claims that may wait for another holder run in a lane of their own
// (forwardLanes), so waits never hold back the calls that only commit, and
// each lane bounds its goroutines and its queue: a call that finds its lane
// full is answered at once without running (refusal) instead of taking a
// goroutine of its own.
func (f forwardService) Calls(stream idempb.Forward_CallsServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	// Every call on the stream is marked forwarded through this one context.
	callCtx := context.WithValue(ctx, forwardedOnStream{}, true)
	lanes := newForwardLanes(f.s.limits.MaxWaitsPerNode)
	// Cancel first: calls still running end, and none blocks on replies
	// that nobody reads any more; then no call outlives the stream.
	defer func() { cancel(); lanes.closeAndWait() }()
	replies := make(chan *idempb.ForwardReply, 256)
	reply := func(r *idempb.ForwardReply) {
		select {
		case replies <- r:
		case <-ctx.Done():
		}
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			for _, c := range msg.GetCalls() {
				l := lanes.commits
				if mayWait(c) {
					l = lanes.waits
				}
				if !l.start(func() { reply(f.s.serveForwarded(callCtx, c)) }) {
					reply(&idempb.ForwardReply{Id: c.GetId(), Error: errorBytes(toStatus(l.full(), f.s.log))})
				}
			}
		}
	}()
	var held *idempb.ForwardReply
	for {
		if held != nil {
			var batch []*idempb.ForwardReply
			batch, held = gather(held, replies)
			if err := stream.Send(&idempb.ForwardReplies{Replies: batch}); err != nil {
				return err
			}
			continue
		}
		select {
		case held = <-replies:
		case err := <-recvErr:
			return err
		case <-f.s.closing:
			return status.Error(codes.Unavailable, "node is shutting down")
		}
	}
}

// forwardLanes are the two lanes of one stream's calls: waits, claims that
// may wait for another holder and so hold a goroutine for as long as their
// wait, and commits, every other call, which holds one until raft resolves
// it (a commit round or two). Apart, a flood of waits never keeps a claim
// that only commits from a worker.
type forwardLanes struct {
	commits, waits *inflight
}

// Lane sizes. A commit lane runs callWorkers calls at once (about what a busy
// node has in flight) and queues commitQueue more, a few commit rounds'
// worth; a call beyond both is answered Unavailable, which the forwarding
// node retries with backoff within its caller's deadline (routed), so a
// burst slows down instead of taking memory without bound. A wait lane
// runs as many waits as the node may hold (Limits.MaxWaitsPerNode, or
// defaultWaitWorkers when that is unlimited) and queues none: a queued
// wait would sit behind waits that may last minutes, and a wait past the
// node's cap is refused by the handler anyway, so past its workers the
// lane refuses as the cap does, ResourceExhausted.
const (
	commitQueue        = 4 * callWorkers
	defaultWaitWorkers = 10000
)

func newForwardLanes(maxWaits int) *forwardLanes {
	if maxWaits <= 0 {
		maxWaits = defaultWaitWorkers
	}
	waitsFull := &tooManyWaits{scope: "node", limit: maxWaits}
	return &forwardLanes{
		commits: newInflight(callWorkers, commitQueue, func() error {
			return &forwardQueueFull{workers: callWorkers, queued: commitQueue}
		}),
		waits: newInflight(maxWaits, 0, func() error { return waitsFull }),
	}
}

func (f *forwardLanes) closeAndWait() {
	f.commits.closeAndWait()
	f.waits.closeAndWait()
}

// forwardQueueFull refuses a forwarded call when the leader's commit lane
// for its stream is full (Unavailable: the forwarding node retries).
type forwardQueueFull struct{ workers, queued int }

func (e *forwardQueueFull) Error() string {
	return fmt.Sprintf("leader busy: %d forwarded calls running and %d queued on this stream; retry", e.workers, e.queued)
}

// inflight runs the calls of one lane of a stream on at most max
// goroutines, with at most maxQueued calls waiting for one, and tracks
// them. The goroutines are workers that stay for the stream's life and take
// the next call when idle: a call's stack grows well past a new goroutine's
// on its way to the commit queue, and growing a fresh one per forwarded
// call was 2 % of the leader's CPU (docs/PERFORMANCE.md). A worker is added
// only when a call finds none idle. Once closeAndWait has returned no call
// starts any more, so waiting for the calls never races a late start.
type inflight struct {
	// handoff passes a call to an idle worker; done, closed by
	// closeAndWait, ends the idle workers.
	handoff chan func()
	done    chan struct{}
	max     int
	// full is the error a call refused by start is answered with.
	full func() error

	// mu guards closed, workers, idle and queued: a call goes to an idle
	// worker, a new worker or the queue by one decision, so none is queued
	// while a worker idles, and a worker goes idle only with the queue
	// empty.
	mu        sync.Mutex
	closed    bool
	workers   int
	idle      int
	queued    []func()
	maxQueued int
	wg        sync.WaitGroup
}

func newInflight(workers, queued int, full func() error) *inflight {
	return &inflight{handoff: make(chan func()), done: make(chan struct{}), max: workers, maxQueued: queued, full: full}
}

// start runs run on an idle worker or a new one, or queues it while the
// lane has every worker busy. It reports false, running nothing, when the
// queue is full too.
func (i *inflight) start(run func()) bool {
	i.mu.Lock()
	switch {
	case i.closed:
		i.mu.Unlock()
		return true // the stream is ending: nobody reads the reply
	case i.idle > 0:
		i.idle--
		i.mu.Unlock()
		// A worker counted idle is at its select, or on its way there.
		select {
		case i.handoff <- run:
		case <-i.done:
		}
		return true
	case i.workers < i.max:
		i.workers++
		i.wg.Add(1)
		i.mu.Unlock()
		go i.work(run)
		return true
	case len(i.queued) < i.maxQueued:
		i.queued = append(i.queued, run)
		i.mu.Unlock()
		return true
	}
	i.mu.Unlock()
	return false
}

// work runs run, then the queued calls and every call handed to it, until
// the stream closes. A call handed over while closeAndWait runs still runs,
// and is waited for.
func (i *inflight) work(run func()) {
	defer i.wg.Done()
	for {
		run()
		i.mu.Lock()
		if len(i.queued) > 0 {
			run = i.queued[0]
			i.queued[0] = nil
			i.queued = i.queued[1:]
			i.mu.Unlock()
			continue
		}
		i.idle++
		i.mu.Unlock()
		select {
		case run = <-i.handoff:
		case <-i.done:
			return
		}
	}
}

func (i *inflight) closeAndWait() {
	i.mu.Lock()
	if !i.closed {
		i.closed = true
		close(i.done)
	}
	i.mu.Unlock()
	i.wg.Wait()
}

// serveForwarded runs one forwarded call; parent carries the stream's
// cancellation and the forwarded mark. A claim that may wait for another
// holder keeps what was left of its client's deadline (none if the client
// set none), since that is what ends the wait and frees its wait slot. Any
// other call ends when raft resolves it — committed, leadership lost, shut
// down — or when the stream ends, so it gets no deadline of its own here: a
// timer and a registration in the stream's context per call were 6 % of
// the leader's CPU under the claim benchmark. A caller that gave up
// meanwhile has its reply dropped by its node.
func (s *Server) serveForwarded(parent context.Context, c *idempb.ForwardCall) *idempb.ForwardReply {
	ctx := parent
	if c.GetTimeout() != nil && mayWait(c) {
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(parent, s.clock, c.GetTimeout().AsDuration())
		defer cancel()
	}
	reply := &idempb.ForwardReply{Id: c.GetId()}
	var err error
	switch r := c.GetRequest().(type) {
	case *idempb.ForwardCall_Claim:
		var resp *idempb.ClaimResponse
		resp, err = s.Claim(ctx, r.Claim)
		reply.Response = &idempb.ForwardReply_Claim{Claim: resp}
	case *idempb.ForwardCall_Complete:
		var resp *idempb.CompleteResponse
		resp, err = s.Complete(ctx, r.Complete)
		reply.Response = &idempb.ForwardReply_Complete{Complete: resp}
	case *idempb.ForwardCall_Release:
		var resp *idempb.ReleaseResponse
		resp, err = s.Release(ctx, r.Release)
		reply.Response = &idempb.ForwardReply_Release{Release: resp}
	case *idempb.ForwardCall_Extend:
		var resp *idempb.ExtendResponse
		resp, err = s.Extend(ctx, r.Extend)
		reply.Response = &idempb.ForwardReply_Extend{Extend: resp}
	case *idempb.ForwardCall_Get:
		var resp *idempb.GetResponse
		resp, err = s.Get(ctx, r.Get)
		reply.Response = &idempb.ForwardReply_Get{Get: resp}
	case *idempb.ForwardCall_Checkpoint:
		var resp *idempb.CheckpointResponse
		resp, err = s.Checkpoint(ctx, r.Checkpoint)
		reply.Response = &idempb.ForwardReply_Checkpoint{Checkpoint: resp}
	default:
		err = status.Errorf(codes.InvalidArgument, "forwarded call %d carries no request", c.GetId())
	}
	if err != nil {
		reply.Response = nil
		reply.Error = errorBytes(err)
	}
	return reply
}

// mayWait reports whether c is a claim that asked to wait for the holder.
func mayWait(c *idempb.ForwardCall) bool {
	w := c.GetClaim().GetWait()
	return w != nil && (w.GetSeconds() != 0 || w.GetNanos() != 0)
}

// errorBytes serializes err's gRPC status, details included.
func errorBytes(err error) []byte {
	b, merr := proto.Marshal(status.Convert(err).Proto())
	if merr != nil {
		b, _ = proto.Marshal(status.New(codes.Internal, err.Error()).Proto())
	}
	return b
}
