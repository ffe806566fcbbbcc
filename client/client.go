package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Config configures a Client. Only Addrs is required.
type Config struct {
	// Addrs lists the gRPC addresses (host:port) of some or all nodes. The
	// client learns the leader's address from them, even if it is not
	// listed; when that advertised address does not resolve or answer from
	// here (a container's hostname, seen from the host that publishes its
	// port), it sends the leader's calls to the listed address where the
	// leader answered, or to any listed node, which forwards them.
	Addrs []string
	// TransportCredentials secure the connections; nil is plaintext.
	TransportCredentials credentials.TransportCredentials
	// DialOptions are added to every connection (per-RPC credentials,
	// interceptors, stats handlers). Tests use an interceptor to drop
	// answers on the wire.
	DialOptions []grpc.DialOption

	// Lease and TTL are the defaults of claims (30s and 24h).
	Lease time.Duration
	TTL   time.Duration
	// Wait is how long Do waits for a duplicate that is in flight before it
	// answers ErrInProgress, and Client.Wait's timeout when it is given none
	// (default 30s; both are cut to answer before ctx's deadline).
	Wait time.Duration

	// MinBackoff and MaxBackoff bound the exponential backoff between
	// retries (20ms and 1s); each delay is drawn uniformly below the bound
	// (full jitter), so clients that failed together do not retry together.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt of a call (default 5s), plus the
	// call's wait, so a hung node costs one attempt, not the whole deadline.
	AttemptTimeout time.Duration
	// Timeout bounds a call, retries included, whose context has no
	// deadline (default 30s), plus the call's wait.
	Timeout time.Duration
	// LeaderRefresh is how long a known leader is used before the client
	// asks the nodes again, in the background (default 10s). A node that
	// handed over leadership keeps answering by forwarding to the new
	// leader; the refresh ends that extra hop.
	LeaderRefresh time.Duration
	// FinishTimeout bounds Do's Complete or Release after the function ran
	// (default 10s). It runs even when ctx is already cancelled: the side
	// effect happened, and recording it is what keeps it from happening twice.
	FinishTimeout time.Duration

	// Logger receives what Do cannot return, such as failed lease
	// extensions; nil is slog.Default().
	Logger *slog.Logger

	// OneShot sends every call to the nodes of Addrs in order, moving on
	// only from one that cannot be reached or answers Unavailable, all
	// within Timeout (Endpoints), instead of finding the leader and
	// retrying with backoff: the policy of a command-line tool, which makes
	// one call and must say within its timeout what happened. A failed
	// call's error then holds a *Failure (Describe). Such a client dials
	// with TLS, not TransportCredentials, so that it can also tell why a
	// TLS server refused it.
	OneShot bool
	// TLS secures a OneShot client's connections; nil is plaintext.
	TLS *tls.Config
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Addrs) == 0 {
		return c, errors.New("client: Config.Addrs is empty")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Lease, 30*time.Second)
	def(&c.TTL, 24*time.Hour)
	def(&c.Wait, 30*time.Second)
	def(&c.MinBackoff, 20*time.Millisecond)
	def(&c.MaxBackoff, time.Second)
	def(&c.AttemptTimeout, 5*time.Second)
	def(&c.Timeout, 30*time.Second)
	def(&c.FinishTimeout, 10*time.Second)
	def(&c.LeaderRefresh, 10*time.Second)
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.OneShot && c.TransportCredentials != nil {
		return c, errors.New("client: a OneShot client takes Config.TLS, not TransportCredentials")
	}
	if c.OneShot && c.TLS != nil {
		// The connections of the pool (leader discovery) use it too.
		c.TransportCredentials = credentials.NewTLS(c.TLS)
	}
	if c.TransportCredentials == nil {
		c.TransportCredentials = insecure.NewCredentials()
	}
	return c, nil
}

// Client is a connection to an idemnode cluster. It is safe for concurrent
// use; create one per process and Close it at the end.
type Client struct {
	cfg Config

	// mu guards conns, leader, leaderAt, next, unreachable and closed.
	// leader is the address calls for the leader go to ("" when unknown),
	// learnt at leaderAt; next rotates through Addrs while none is known;
	// unreachable holds when advertised leader addresses failed a probe
	// (see reachable).
	mu          sync.Mutex
	conns       map[string]*grpc.ClientConn
	leader      string
	leaderAt    time.Time
	next        int
	unreachable map[string]time.Time
	closed      bool

	// oneShot runs every call when Config.OneShot is set.
	oneShot *Endpoints

	// discovering is the leader discovery running now, shared by every
	// caller (nil when none runs); guarded by mu.
	discovering *discovery
	// stopped ends with Close (stop cancels it): it bounds background
	// work, which background counts so that Close can wait for it.
	stopped    context.Context
	stop       context.CancelFunc
	background sync.WaitGroup
}

// New returns a client of the cluster at cfg.Addrs. It does not connect
// yet: connections are made on first use and re-made after failures.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	stopped, stop := context.WithCancel(context.Background())
	c := &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}, unreachable: map[string]time.Time{},
		stopped: stopped, stop: stop}
	if cfg.OneShot {
		c.oneShot = &Endpoints{Addrs: cfg.Addrs, TLS: cfg.TLS, DialOptions: cfg.DialOptions, Timeout: cfg.Timeout}
	}
	return c, nil
}

// Close stops the client's background work and closes every connection.
// Calls in flight fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	// A leader discovery running now ends with stop; wait for it, so that
	// nothing of the client outlives Close.
	c.stop()
	c.background.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for addr, conn := range c.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection to %s: %w", addr, err))
		}
		delete(c.conns, addr)
	}
	return errors.Join(errs...)
}

// Leader returns the address of the node the client believes leads, or ""
// when it does not know one yet.
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// conn returns the connection to addr, dialling it on first use.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if conn, ok := c.conns[addr]; ok {
		return conn, nil
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(c.cfg.TransportCredentials),
		// A node that went away must fail calls fast so the retry finds the
		// new leader within the deadline: bounded reconnects, and pings
		// that notice a dead link. idemnode servers allow pings every 500ms.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
		}, MinConnectTimeout: time.Second}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true}),
		// Fixed flow-control windows turn off gRPC's bandwidth estimator,
		// which pings the server every round trip while answers flow: a
		// read and a write of the server's per ping, as many pings as
		// calls at one call at a time. The answers are small (a record's
		// response is at most about 1 MiB); so are the windows.
		grpc.WithInitialWindowSize(1 << 20),
		grpc.WithInitialConnWindowSize(2 << 20),
	}
	conn, err := grpc.NewClient(addr, append(opts, c.cfg.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.conns[addr] = conn
	return conn, nil
}
