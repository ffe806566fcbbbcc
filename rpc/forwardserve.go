package rpc

import (
	"context"
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

// Calls runs every call of the stream concurrently, through the same
// handlers a client call takes (marked forwarded, so they never travel
// on), and sends the replies back as they complete, batched like the calls.
func (f forwardService) Calls(stream idempb.Forward_CallsServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	// Every call on the stream is marked forwarded through this one context.
	callCtx := context.WithValue(ctx, forwardedOnStream{}, true)
	calls := newInflight()
	// Cancel first: calls still running end, and none blocks on replies
	// that nobody reads any more; then no call outlives the stream.
	defer func() { cancel(); calls.closeAndWait() }()
	replies := make(chan *idempb.ForwardReply, 256)
	recvErr := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			for _, c := range msg.GetCalls() {
				calls.start(func() {
					r := f.s.serveForwarded(callCtx, c)
					select {
					case replies <- r:
					case <-ctx.Done():
					}
				})
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

// inflight runs the calls of one stream, each on a goroutine of its own,
// and tracks them. The goroutines are workers that stay for the stream's
// life and take the next call when idle: a call's stack grows well past a
// new goroutine's on its way to the commit queue, and growing a fresh one
// per forwarded call was 2 % of the leader's CPU (docs/PERFORMANCE.md).
// Past callWorkers busy workers, a call gets a goroutine of its own, so a
// stream of waiting claims never holds back the calls behind them. Once
// closeAndWait has returned it starts no more, so waiting for the calls
// never races a late start.
type inflight struct {
	// idle hands a call to a worker waiting for one; done, closed by
	// closeAndWait, ends the idle workers.
	idle chan func()
	done chan struct{}

	// mu guards closed and workers.
	mu      sync.Mutex
	closed  bool
	workers int
	wg      sync.WaitGroup
}

func newInflight() *inflight {
	return &inflight{idle: make(chan func()), done: make(chan struct{})}
}

func (i *inflight) start(run func()) {
	select {
	case i.idle <- run:
		return
	default:
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return
	}
	i.wg.Add(1)
	if i.workers < callWorkers {
		i.workers++
		go i.work(run)
		return
	}
	go func() {
		defer i.wg.Done()
		run()
	}()
}

// work runs run, then every call handed to it, until the stream closes.
// A call handed over while closeAndWait runs still runs, and is waited for.
func (i *inflight) work(run func()) {
	defer i.wg.Done()
	for {
		run()
		select {
		case run = <-i.idle:
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
