package jsonapi

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// service is a gRPC service the JSON API serves: its description and the
// implementation registered for it on the gRPC server.
type service struct {
	Desc *grpc.ServiceDesc
	Impl any
}

// inproc is a grpc.ClientConnInterface that calls the services' handlers in
// this process, through the same interceptors as the gRPC server, so a JSON
// call is authenticated, rate limited, counted and forwarded to the leader
// exactly as a gRPC call is, without a loopback connection. The caller's
// outgoing metadata (the Authorization header) becomes the handler's
// incoming metadata; its peer (the TLS state of the HTTP connection) is
// already in the context (withPeer).
type inproc struct {
	unary   map[string]unaryMethod
	streams map[string]streamMethod
	// intercept and interceptStream are the server's interceptors, chained.
	intercept       grpc.UnaryServerInterceptor
	interceptStream grpc.StreamServerInterceptor
}

type unaryMethod struct {
	impl    any
	handler grpc.MethodHandler
}

type streamMethod struct {
	impl any
	desc grpc.StreamDesc
}

func newInproc(services []service, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) *inproc {
	c := &inproc{
		unary:           map[string]unaryMethod{},
		streams:         map[string]streamMethod{},
		intercept:       chainUnary(unary),
		interceptStream: chainStream(stream),
	}
	for _, s := range services {
		for _, m := range s.Desc.Methods {
			c.unary["/"+s.Desc.ServiceName+"/"+m.MethodName] = unaryMethod{impl: s.Impl, handler: m.Handler}
		}
		for _, d := range s.Desc.Streams {
			c.streams["/"+s.Desc.ServiceName+"/"+d.StreamName] = streamMethod{impl: s.Impl, desc: d}
		}
	}
	return c
}

// Invoke runs a unary method's handler with args as its request and copies
// its response into reply.
func (c *inproc) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	m, ok := c.unary[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	ctx, call := serverContext(ctx, method)
	dec := func(v any) error {
		proto.Merge(v.(proto.Message), args.(proto.Message))
		return nil
	}
	resp, err := m.handler(m.impl, ctx, dec, c.intercept)
	call.deliver(opts)
	if err != nil {
		return toStatus(ctx, err)
	}
	proto.Reset(reply.(proto.Message))
	proto.Merge(reply.(proto.Message), resp.(proto.Message))
	return nil
}

// NewStream runs a streaming method's handler in its own goroutine; the
// returned stream passes messages to and from it.
func (c *inproc) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	m, ok := c.streams[method]
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	sctx, call := serverContext(ctx, method)
	s := &pipe{ctx: ctx, call: call, in: make(chan proto.Message, 1), out: make(chan proto.Message), done: make(chan struct{})}
	info := &grpc.StreamServerInfo{FullMethod: method, IsClientStream: desc.ClientStreams, IsServerStream: desc.ServerStreams}
	go func() {
		err := c.interceptStream(m.impl, &serverSide{pipe: s, ctx: sctx}, info, m.desc.Handler)
		if err != nil {
			s.err = toStatus(sctx, err)
		}
		call.deliver(opts)
		close(s.done)
	}()
	return &clientSide{pipe: s}, nil
}

// serverContext is the context a handler sees: the caller's outgoing
// metadata as its incoming metadata, none outgoing (a forward to the leader
// adds its own), and a transport stream that keeps the headers and trailers
// the handler sets.
func serverContext(ctx context.Context, method string) (context.Context, *call) {
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = metadata.NewIncomingContext(ctx, md)
	ctx = metadata.NewOutgoingContext(ctx, nil)
	c := &call{method: method}
	return grpc.NewContextWithServerTransportStream(ctx, c), c
}

// toStatus makes every error a status, as gRPC does on the wire: a context
// that ended becomes Canceled or DeadlineExceeded, anything else Unknown.
func toStatus(ctx context.Context, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// call is a handler's grpc.ServerTransportStream.
type call struct {
	method string

	// mu guards header and trailer: a streaming handler sets them on its
	// goroutine while the caller's goroutine reads them.
	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
}

func (c *call) Method() string { return c.method }

func (c *call) SetHeader(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.header = metadata.Join(c.header, md)
	return nil
}

func (c *call) SendHeader(md metadata.MD) error { return c.SetHeader(md) }

func (c *call) SetTrailer(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trailer = metadata.Join(c.trailer, md)
	return nil
}

// deliver hands the headers and trailers to the caller's grpc.Header and
// grpc.Trailer options.
func (c *call) deliver(opts []grpc.CallOption) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = c.header.Copy()
		case grpc.TrailerCallOption:
			*o.TrailerAddr = c.trailer.Copy()
		}
	}
}

// pipe joins a streaming handler to its caller.
type pipe struct {
	ctx  context.Context // the caller's
	call *call
	in   chan proto.Message // the caller's requests
	out  chan proto.Message // the handler's responses
	done chan struct{}      // closed when the handler returned
	err  error              // the handler's status, read after done
}

// clientSide is the caller's end: grpc.ClientStream.
type clientSide struct {
	*pipe
	closed bool
}

func (s *clientSide) Header() (metadata.MD, error) {
	s.call.mu.Lock()
	defer s.call.mu.Unlock()
	return s.call.header.Copy(), nil
}

func (s *clientSide) Trailer() metadata.MD {
	s.call.mu.Lock()
	defer s.call.mu.Unlock()
	return s.call.trailer.Copy()
}

func (s *clientSide) CloseSend() error {
	if !s.closed {
		s.closed = true
		close(s.in)
	}
	return nil
}

func (s *clientSide) Context() context.Context { return s.ctx }

func (s *clientSide) SendMsg(m any) error {
	if s.closed {
		return errors.New("send on a closed stream")
	}
	select {
	case s.in <- proto.Clone(m.(proto.Message)):
		return nil
	case <-s.done:
		return io.EOF // gRPC's answer: the status comes from RecvMsg
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// RecvMsg returns the handler's next message, io.EOF after its last, or
// the status it ended with.
func (s *clientSide) RecvMsg(m any) error {
	select {
	case msg := <-s.out:
		proto.Reset(m.(proto.Message))
		proto.Merge(m.(proto.Message), msg)
		return nil
	case <-s.done:
		if s.err != nil {
			return s.err
		}
		return io.EOF
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

// serverSide is the handler's end: grpc.ServerStream.
type serverSide struct {
	*pipe
	ctx context.Context // the handler's
}

func (s *serverSide) SetHeader(md metadata.MD) error  { return s.call.SetHeader(md) }
func (s *serverSide) SendHeader(md metadata.MD) error { return s.call.SendHeader(md) }
func (s *serverSide) SetTrailer(md metadata.MD)       { _ = s.call.SetTrailer(md) }
func (s *serverSide) Context() context.Context        { return s.ctx }

func (s *serverSide) SendMsg(m any) error {
	select {
	case s.out <- proto.Clone(m.(proto.Message)):
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *serverSide) RecvMsg(m any) error {
	select {
	case msg, ok := <-s.in:
		if !ok {
			return io.EOF
		}
		proto.Reset(m.(proto.Message))
		proto.Merge(m.(proto.Message), msg)
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// chainUnary runs interceptors in order around a handler, as
// grpc.ChainUnaryInterceptor does.
func chainUnary(ics []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		next := handler
		for i := len(ics) - 1; i >= 0; i-- {
			ic, inner := ics[i], next
			next = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, inner) }
		}
		return next(ctx, req)
	}
}

// chainStream is chainUnary for streams.
func chainStream(ics []grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		next := handler
		for i := len(ics) - 1; i >= 0; i-- {
			ic, inner := ics[i], next
			next = func(srv any, ss grpc.ServerStream) error { return ic(srv, ss, info, inner) }
		}
		return next(srv, ss)
	}
}

var _ grpc.ClientConnInterface = (*inproc)(nil)
