package rpc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// maxForwardBatchBytes bounds one forwarding message, so it stays well
// under gRPC's message size limit even with large responses in it; a single
// call larger than this still goes alone.
const maxForwardBatchBytes = 1 << 20

// link is one forwarding stream from this node to one leader address. Calls
// queue while the previous message is being sent and go out together; the
// leader answers each call on its own as soon as it has the result.
type link struct {
	addr  string
	queue chan *idempb.ForwardCall
	// dead is closed once the stream failed; err says why. A dead link is
	// replaced by a new one on the next call.
	dead   chan struct{}
	cancel context.CancelFunc

	// mu guards nextID, pending and err.
	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *idempb.ForwardReply
	err     error
}

// link returns the live stream to addr, opening one if needed.
func (f *forwarder) link(addr string) (*link, error) {
	f.mu.Lock()
	if l, ok := f.links[addr]; ok {
		f.mu.Unlock()
		return l, nil
	}
	f.mu.Unlock()
	conn, err := f.conn(addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.links[addr]; ok {
		return l, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{addr: addr, queue: make(chan *idempb.ForwardCall, 1024), dead: make(chan struct{}), cancel: cancel,
		pending: map[uint64]chan *idempb.ForwardReply{}}
	if f.links == nil {
		f.links = map[string]*link{}
	}
	f.links[addr] = l
	go func() {
		stream, err := idempb.NewForwardClient(conn).Calls(ctx)
		if err == nil {
			go l.receive(stream)
			err = l.send(stream)
		}
		l.fail(err)
		f.drop(addr, l)
	}()
	return l, nil
}

// drop forgets l if it is still the link to addr.
func (f *forwarder) drop(addr string, l *link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.links[addr] == l {
		delete(f.links, addr)
	}
}

// call sends one call over the link and waits for its reply. A broken
// stream answers Unavailable, which routed retries: the call may have been
// applied, and every call is safe to repeat.
func (l *link) call(ctx context.Context, c *idempb.ForwardCall) (*idempb.ForwardReply, error) {
	if d, ok := ctx.Deadline(); ok {
		c.Timeout = durationpb.New(max(time.Until(d), time.Millisecond))
	}
	reply := make(chan *idempb.ForwardReply, 1)
	if err := l.register(c, reply); err != nil {
		return nil, err
	}
	defer l.unregister(c.Id)
	select {
	case l.queue <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.dead:
		return nil, l.failure()
	}
	select {
	case r := <-reply:
		return r, replyError(r)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.dead:
		select {
		case r := <-reply:
			return r, replyError(r)
		default:
			return nil, l.failure()
		}
	}
}

func (l *link) register(c *idempb.ForwardCall, reply chan *idempb.ForwardReply) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.nextID++
	c.Id = l.nextID
	l.pending[c.Id] = reply
	return nil
}

func (l *link) unregister(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, id)
}

func (l *link) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// send writes queued calls, as many per message as are waiting and fit.
func (l *link) send(stream idempb.Forward_CallsClient) error {
	var held *idempb.ForwardCall
	for {
		first := held
		if first == nil {
			select {
			case first = <-l.queue:
			case <-l.dead:
				return nil
			}
		}
		var calls []*idempb.ForwardCall
		calls, held = gather(first, l.queue)
		if err := stream.Send(&idempb.ForwardBatch{Calls: calls}); err != nil {
			return err
		}
	}
}

// gather takes first and whatever else is queued while the message stays
// under maxForwardBatchBytes; the item that would not fit is returned as
// held, to lead the next message. A single item is never held back.
func gather[T proto.Message](first T, queue <-chan T) (batch []T, held T) {
	batch = []T{first}
	size := proto.Size(first)
	for {
		select {
		case m := <-queue:
			if size += proto.Size(m); size > maxForwardBatchBytes {
				return batch, m
			}
			batch = append(batch, m)
		default:
			return batch, held
		}
	}
}

// receive hands each reply to its caller until the stream ends.
func (l *link) receive(stream idempb.Forward_CallsClient) {
	for {
		msg, err := stream.Recv()
		if err != nil {
			l.fail(err)
			return
		}
		l.mu.Lock()
		for _, r := range msg.GetReplies() {
			if ch, ok := l.pending[r.GetId()]; ok {
				ch <- r
				delete(l.pending, r.GetId())
			}
		}
		l.mu.Unlock()
	}
}

// fail marks the link dead with err, waking every caller waiting on it.
func (l *link) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if err == nil {
		err = fmt.Errorf("closed")
	}
	l.err = grpcstatus.Errorf(codes.Unavailable, "forwarding stream to leader %s: %v", l.addr, err)
	switch grpcstatus.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
		// A configuration problem (this node is not accepted as a peer, or
		// the leader does not serve the stream): retrying cannot help, so
		// the caller sees it at once instead of a timeout.
		l.err = grpcstatus.Errorf(grpcstatus.Code(err), "forwarding stream to leader %s: %s", l.addr, grpcstatus.Convert(err).Message())
	}
	close(l.dead)
	l.cancel()
}

// replyError turns a reply's serialized status back into a gRPC error.
func replyError(r *idempb.ForwardReply) error {
	if len(r.GetError()) == 0 {
		return nil
	}
	st := &status.Status{}
	if err := proto.Unmarshal(r.GetError(), st); err != nil {
		return grpcstatus.Errorf(codes.Internal, "undecodable error from the leader: %v", err)
	}
	return grpcstatus.ErrorProto(st)
}
