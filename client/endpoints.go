package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Endpoints sends one call to a list of nodes, in order, within one
// deadline: the policy of a command-line tool, which makes one call and
// must say within its timeout what happened. A Client instead retries
// with backoff until the caller's context ends, for a process that keeps
// running. Both move on from a node only when it cannot be reached or
// answers Unavailable: a rate limit is not dodged by asking the next node.
type Endpoints struct {
	// Addrs are the nodes (host:port), tried in order.
	Addrs []string
	// TLS secures the connections; nil is plaintext. Its ServerName, if
	// set, is expected of every node of Addrs.
	TLS *tls.Config
	// DialOptions are added to every connection (per-call credentials).
	DialOptions []grpc.DialOption
	// Timeout bounds the whole call, every address tried included.
	Timeout time.Duration
	// Once sends a call that is not idempotent (transfer-leadership,
	// remove-member) to one node only: once a node received it, its
	// failure is the answer, even when other nodes are left.
	Once bool
}

// ExplainReserve is the part of a call's timeout kept back from the call
// itself, so that a failure can still be explained in time.
func ExplainReserve(timeout time.Duration) time.Duration {
	return min(500*time.Millisecond, timeout/4)
}

// Call runs fn against the nodes of e.Addrs in order, within e.Timeout in
// all. It moves on to the next node when one cannot be reached, or (unless
// e.Once) when it answers Unavailable. fn's errors that are not gRPC
// statuses are returned as they are; a gRPC failure becomes a *Failure
// that says what happened (Describe), explained further when the node
// knows no leader or a TLS server refused the client's certificate.
func (e *Endpoints) Call(ctx context.Context, fn func(context.Context, *grpc.ClientConn) error) error {
	if len(e.Addrs) == 0 {
		return errors.New("client: Endpoints.Addrs is empty")
	}
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	callCtx, cancelCall := context.WithTimeout(ctx, e.Timeout-ExplainReserve(e.Timeout))
	defer cancelCall()
	var earlier []string
	for i, addr := range e.Addrs {
		conn, err := e.Dial(addr)
		if err != nil {
			return fmt.Errorf("--addr %q: %w", addr, err)
		}
		reached, err := tryEndpoint(callCtx, conn, fn, len(e.Addrs)-i)
		if _, isStatus := status.FromError(err); err == nil || !isStatus {
			conn.Close()
			return err
		}
		f := describe(err, addr, e.Timeout)
		if i < len(e.Addrs)-1 && f.Code == CodeName(codes.Unavailable) && callCtx.Err() == nil && (!reached || !e.Once) {
			earlier = append(earlier, f.Message)
			conn.Close()
			continue
		}
		explainNoLeader(ctx, f, conn)
		e.explainRefusal(ctx, f, addr)
		conn.Close()
		if len(earlier) > 0 && f.Kind == KindRetry { // every endpoint failed
			f.Message = strings.Join(append(earlier, f.Message), "; ")
		}
		return f
	}
	panic("unreachable: Addrs is never empty")
}

// tryEndpoint runs fn on conn. When other endpoints are left it first
// waits for the connection, at most its share of the time left, so a node
// that does not answer at all (a dead host) leaves time for the next.
// reached says whether the connection was up when fn ran.
func tryEndpoint(ctx context.Context, conn *grpc.ClientConn, fn func(context.Context, *grpc.ClientConn) error, left int) (reached bool, err error) {
	if left == 1 {
		return true, fn(ctx, conn)
	}
	deadline, _ := ctx.Deadline()
	share := time.Until(deadline) / time.Duration(left)
	connectCtx, cancel := context.WithTimeout(ctx, share)
	state := waitReady(connectCtx, conn)
	cancel()
	switch state {
	case connectivity.Ready:
		return true, fn(ctx, conn)
	case connectivity.TransientFailure:
		// Fails at once, with the reason the connection failed.
		return false, fn(ctx, conn)
	}
	return false, status.Errorf(codes.Unavailable, "i/o timeout: no connection within %s", share.Round(time.Millisecond))
}

// waitReady connects conn and returns its state once it is up, has failed,
// or ctx ends.
func waitReady(ctx context.Context, conn *grpc.ClientConn) connectivity.State {
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready || s == connectivity.TransientFailure || s == connectivity.Shutdown {
			return s
		}
		if !conn.WaitForStateChange(ctx, s) {
			return conn.GetState()
		}
	}
}

// Dial connects to addr, one of e.Addrs.
func (e *Endpoints) Dial(addr string) (*grpc.ClientConn, error) {
	return e.dial(addr, e.TLS)
}

// DialLeader connects to the leader at the address a node reported: as
// Dial, but expecting the leader's own name (the host of its address) in
// its certificate, not the ServerName of e.TLS.
func (e *Endpoints) DialLeader(addr string) (*grpc.ClientConn, error) {
	cfg := e.TLS
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.ServerName = ""
	}
	return e.dial(addr, cfg)
}

func (e *Endpoints) dial(addr string, cfg *tls.Config) (*grpc.ClientConn, error) {
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	return grpc.NewClient(addr, append(append([]grpc.DialOption{}, e.DialOptions...), grpc.WithTransportCredentials(creds))...)
}

// explainRefusal finds out, when a TLS connection to addr broke, whether
// the server refused the client certificate: with TLS 1.3 the server
// checks it after the client's handshake is done, so gRPC reports only a
// broken pipe or EOF. It repeats the handshake and reads the server's
// first bytes, which are then its alert, and says so in f.
func (e *Endpoints) explainRefusal(ctx context.Context, f *Failure, addr string) {
	if e.TLS == nil || (f.Reason != ReasonConnectionLost && f.Reason != ReasonClientCertRequired) {
		return
	}
	cfg := e.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	cfg.NextProtos = []string{"h2"} // as gRPC offers it
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err == nil {
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
	}
	switch {
	case err == nil || !strings.Contains(err.Error(), "remote error: tls:"):
		return
	case len(e.TLS.Certificates) == 0 && e.TLS.GetClientCertificate == nil:
		f.Kind, f.Reason = KindDenied, ReasonClientCertRequired
		f.Message = "the server requires a client certificate (--tls-cert, --tls-key)"
	default:
		f.Kind, f.Reason = KindDenied, ReasonClientCertRefused
		f.Message = fmt.Sprintf("the server at %s refused the client certificate of --tls-cert (%s): is it signed by a CA the server trusts?",
			addr, from(err.Error(), "tls:"))
	}
}
