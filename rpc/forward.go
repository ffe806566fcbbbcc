package rpc

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// forwardedKey marks a request a node forwarded to the leader. A node that
// receives a marked request and is not the leader answers NOT_LEADER instead
// of forwarding again, so a request never travels in a loop; the origin
// then finds the new leader itself.
const forwardedKey = "idem-forwarded"

func isForwarded(ctx context.Context) bool {
	if ctx.Value(forwardedOnStream{}) != nil {
		return true
	}
	// ValueFromIncomingContext, unlike FromIncomingContext, copies no
	// metadata: this runs several times on every call.
	return len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) > 0
}

// forwardedOnStream marks the context of a call that arrived on a
// forwarding stream (forwardserve.go), where no metadata travels per call.
type forwardedOnStream struct{}

// forwarder keeps one client connection per leader address. Connections
// leave from the node's own IP (see the loopback trap in cluster/DESIGN.md).
type forwarder struct {
	dialer net.Dialer
	// creds secure connections to other nodes; nil means plaintext.
	creds credentials.TransportCredentials
	// unaryOnly forwards every call as its own unary RPC carrying the
	// caller's credentials, for clusters whose nodes cannot prove to each
	// other that they are peers (authentication without peer TLS).
	unaryOnly bool
	// dialOpts are added to every connection (WithForwardDialOptions).
	dialOpts []grpc.DialOption

	// idleAfter overrides forwardIdle (tests).
	idleAfter time.Duration

	// mu guards conns, links, busy and lastUsed. busy counts the calls
	// forwarded to an address and not answered yet; lastUsed is when one
	// last began or ended.
	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
	links    map[string]*link
	busy     map[string]int
	lastUsed map[string]time.Time
}

// forwardIdle is how long a connection to an address no call was forwarded
// to is kept. Leader addresses move (a node restarted elsewhere, a whole
// cluster moved), and a connection kept to a departed one would be pinged
// and redialled for ever; the grace keeps the connections of a leadership
// that moves back and forth.
const forwardIdle = time.Minute

// begin notes a call forwarded to addr and returns the function to call
// when it is answered. It also closes and forgets the connections to
// other addresses that no call used for forwardIdle: a call in flight on
// one keeps it.
func (f *forwarder) begin(addr string) (end func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if f.busy == nil {
		f.busy, f.lastUsed = map[string]int{}, map[string]time.Time{}
	}
	f.busy[addr]++
	f.lastUsed[addr] = now
	idle := forwardIdle
	if f.idleAfter > 0 {
		idle = f.idleAfter
	}
	for a, c := range f.conns {
		if a == addr || f.busy[a] > 0 || now.Sub(f.lastUsed[a]) < idle {
			continue
		}
		if l, ok := f.links[a]; ok {
			l.fail(errors.New("leader address no longer used"))
			delete(f.links, a)
		}
		c.Close()
		delete(f.conns, a)
		delete(f.busy, a)
		delete(f.lastUsed, a)
	}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.busy[addr]--
		f.lastUsed[addr] = time.Now()
	}
}

func (f *forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	dialer, creds := f.dialer, f.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", a)
		}),
		// A leader that vanished (crashed, partitioned) must fail the call
		// fast, so the retry finds the new leader within the caller's
		// deadline: bounded connects, and pings that notice a dead link.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
		}, MinConnectTimeout: time.Second}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: time.Second, Timeout: time.Second, PermitWithoutStream: true}),
		// Fixed windows, as the server's (ServerOptions): no bandwidth
		// pings, which the leader would answer on every round trip.
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
	}
	c, err := grpc.NewClient(addr, append(opts, f.dialOpts...)...)
	if err != nil {
		return nil, err
	}
	if f.conns == nil {
		f.conns = map[string]*grpc.ClientConn{}
	}
	f.conns[addr] = c
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, l := range f.links {
		l.fail(errors.New("node is shutting down"))
		delete(f.links, addr)
	}
	for addr, c := range f.conns {
		c.Close()
		delete(f.conns, addr)
	}
}

// routed runs a call locally and, when this node is not the leader, sends
// the same request to the leader and returns its answer. While no leader is
// known it waits for one within the caller's deadline. Every idemnode
// command is safe to send twice (claims carry their owner, completes their
// token and response), so Unavailable answers are retried until the deadline.
func routed[T any](ctx context.Context, s *Server, local func(context.Context) (T, error),
	remote func(ctx context.Context, leaderAddr string) (T, error)) (T, error) {
	var zero T
	backoff := 10 * time.Millisecond
	for {
		resp, err := local(ctx)
		if !movedAway(err) || isForwarded(ctx) {
			return resp, toStatus(err, s.log)
		}
		resp, err = forwardOnce(ctx, s, remote)
		if !retryable(err) {
			return resp, err
		}
		select {
		case <-ctx.Done():
			if errors.Is(err, errNoLeaderKnown) {
				err = cluster.ErrNoLeader
			}
			return zero, toStatus(err, s.log)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// movedAway reports whether the call failed because leadership is (or just
// went) elsewhere. A command that lost leadership while committing may have
// been applied; sending it again to the new leader is still safe, because
// every command is idempotent (a claim carries its owner, a completion its
// token and response), so the client sees one answer instead of an error.
func movedAway(err error) bool {
	return errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrLeadershipLost)
}

// errNoLeaderKnown: no leader is known right now (an election is running).
var errNoLeaderKnown = errors.New("no leader known")

// errLeaderIsSelf: leadership moved here since the local attempt.
var errLeaderIsSelf = errors.New("this node became leader")

// forwardOnce sends the request to the leader this node currently knows.
func forwardOnce[T any](ctx context.Context, s *Server, remote func(context.Context, string) (T, error)) (T, error) {
	var zero T
	id, addr := s.backend.Leader()
	switch {
	case id == "" || addr == "":
		return zero, errNoLeaderKnown
	case id == s.backend.ID():
		return zero, errLeaderIsSelf
	}
	s.countForward(ctx)
	defer s.fwd.begin(addr)()
	return remote(ctx, addr)
}

// forwardCall sends c to the leader at addr over the forwarding stream and
// returns the reply.
func (s *Server) forwardCall(ctx context.Context, addr string, c *idempb.ForwardCall) (*idempb.ForwardReply, error) {
	l, err := s.fwd.link(addr)
	if err != nil {
		return nil, err
	}
	return l.call(ctx, c)
}

// viaStream returns routed's remote step for a call that travels over the
// forwarding stream as call() and comes back as pick of the reply; with
// unary forwarding it takes the unary RPC instead.
func viaStream[T any](s *Server, call func() *idempb.ForwardCall, pick func(*idempb.ForwardReply) T,
	unary func(context.Context, idempb.IdempotencyClient) (T, error)) func(context.Context, string) (T, error) {
	if s.fwd.unaryOnly {
		return viaUnary(s, func(ctx context.Context, c *grpc.ClientConn) (T, error) {
			return unary(ctx, idempb.NewIdempotencyClient(c))
		})
	}
	return func(ctx context.Context, addr string) (T, error) {
		r, err := s.forwardCall(ctx, addr, call())
		return pick(r), err
	}
}

// viaUnary adapts a unary call on the connection to the leader into
// routed's remote step, for calls that hold the leader for long (waits) or
// are rare (admin). The call is marked forwarded.
func viaUnary[T any](s *Server, call func(context.Context, *grpc.ClientConn) (T, error)) func(context.Context, string) (T, error) {
	return func(ctx context.Context, addr string) (T, error) {
		conn, err := s.fwd.conn(addr)
		if err != nil {
			var zero T
			return zero, err
		}
		return call(metadata.AppendToOutgoingContext(ctx, forwardedKey, "1"), conn)
	}
}

// retryable reports whether a forwarding failure is worth another round:
// no leader known yet, leadership moved, or the leader could not be reached.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errNoLeaderKnown) || errors.Is(err, errLeaderIsSelf) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable
}
