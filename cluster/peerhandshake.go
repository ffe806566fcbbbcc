package cluster

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// The identity handshake (cluster/DESIGN.md, "Cluster identity"). A node
// whose state holds a cluster identity opens every Raft connection with
//
//	"IDNC" version(1) len(1) identity
//
// and the accepting node answers
//
//	status(1) len(1) identity
//
// with its own identity, status 0 to go on or 1 to refuse. Either side
// refuses when both hold an identity and they differ, so a node holding
// another cluster's state can neither replicate to nor vote in this one,
// whatever the leader's reconcile decides. A node without an identity (one
// joining empty, or one whose state predates identities) sends no hello:
// raft's own first byte is an RPC type (0–4), never 'I', so the accepting
// side tells the two apart, and an older release, which never holds an
// identity, is never sent one (a cluster gets its identity only once every
// voter runs a release that checks it; see upgrade.go).
const (
	helloMagic   = "IDNC"
	helloVersion = 1
	helloOK      = 0
	helloRefused = 1
)

// ErrOtherCluster is a Raft connection refused because the peer holds the
// state of another cluster.
var ErrOtherCluster = errors.New("the peer belongs to another cluster")

// identityStreamLayer runs the identity handshake over a stream layer (the
// bound one, or TLS on it: the hello then travels inside TLS).
type identityStreamLayer struct {
	raft.StreamLayer
	// local returns this node's identity, nil while it has none.
	local func() []byte
	// refused counts and reports a refusal (metrics and a log line).
	refused func(peer string, theirs []byte, accepting bool)
}

// Dial connects and, when this node has an identity, says hello within
// timeout and checks the answer.
func (s *identityStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	ours := s.local()
	if len(ours) == 0 {
		return c, nil
	}
	theirs, err := dialHello(c, ours, timeout)
	if err != nil {
		c.Close()
		if errors.Is(err, ErrOtherCluster) {
			s.refused(string(addr), theirs, false)
		}
		return nil, fmt.Errorf("raft identity handshake with %s: %w", addr, err)
	}
	return c, nil
}

// dialHello sends our identity and reads the peer's answer.
func dialHello(c net.Conn, ours []byte, timeout time.Duration) ([]byte, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	hello := append([]byte(helloMagic), helloVersion, byte(len(ours)))
	if _, err := c.Write(append(hello, ours...)); err != nil {
		return nil, fmt.Errorf("send hello: %w", err)
	}
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil, fmt.Errorf("read the answer to hello: %w", err)
	}
	theirs, err := readIdentity(c, head[1])
	if err != nil {
		return nil, err
	}
	if head[0] != helloOK || differ(ours, theirs) {
		return theirs, fmt.Errorf("%w: it holds cluster %s, this node cluster %s", ErrOtherCluster, FormatClusterID(theirs), FormatClusterID(ours))
	}
	return theirs, nil
}

// Accept returns the next connection; its hello, if any, is read by its
// first Read, in raft's per-connection goroutine, never in the accept loop.
func (s *identityStreamLayer) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &helloConn{Conn: c, layer: s}, nil
}

// helloConn is an accepted connection that checks the dialer's hello
// before raft reads its first RPC.
type helloConn struct {
	net.Conn
	layer *identityStreamLayer
	once  sync.Once
	// pending holds bytes read while looking for a hello that belong to
	// raft: the first byte of a connection that sent none.
	pending []byte
	err     error
}

func (c *helloConn) Read(p []byte) (int, error) {
	c.once.Do(c.handshake)
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// handshake reads the first byte; a hello is checked and answered, any
// other byte is raft's and is handed on.
func (c *helloConn) handshake() {
	var first [1]byte
	if _, err := io.ReadFull(c.Conn, first[:]); err != nil {
		c.err = err
		return
	}
	if first[0] != helloMagic[0] {
		c.pending = first[:]
		return
	}
	theirs, err := readHello(c.Conn)
	if err != nil {
		c.err = fmt.Errorf("raft identity handshake from %s: %w", c.RemoteAddr(), err)
		return
	}
	ours := c.layer.local()
	status := byte(helloOK)
	if differ(ours, theirs) {
		status = helloRefused
	}
	answer := append([]byte{status, byte(len(ours))}, ours...)
	if _, err := c.Conn.Write(answer); err != nil {
		c.err = fmt.Errorf("answer hello from %s: %w", c.RemoteAddr(), err)
		return
	}
	if status == helloRefused {
		c.layer.refused(c.RemoteAddr().String(), theirs, true)
		c.err = fmt.Errorf("raft connection from %s: %w (it holds cluster %s, this node cluster %s)",
			c.RemoteAddr(), ErrOtherCluster, FormatClusterID(theirs), FormatClusterID(ours))
		c.Conn.Close()
	}
}

// readHello reads the rest of a hello after its first byte.
func readHello(r io.Reader) ([]byte, error) {
	var head [len(helloMagic) + 1]byte // the magic's last three bytes, version, length
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("read hello: %w", err)
	}
	if string(head[:3]) != helloMagic[1:] {
		return nil, fmt.Errorf("not a hello: %q", head[:3])
	}
	if head[3] != helloVersion {
		return nil, fmt.Errorf("hello version %d, this release speaks %d", head[3], helloVersion)
	}
	return readIdentity(r, head[4])
}

func readIdentity(r io.Reader, n byte) ([]byte, error) {
	if int(n) > fsm.MaxClusterID {
		return nil, fmt.Errorf("cluster identity of %d bytes", n)
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(r, id); err != nil {
		return nil, fmt.Errorf("read cluster identity: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	return id, nil
}

// differ reports whether two identities are both known and not the same.
func differ(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && !bytes.Equal(a, b)
}

// FormatClusterID is how a cluster identity is shown: hex, or "none".
func FormatClusterID(id []byte) string {
	if len(id) == 0 {
		return "none"
	}
	return hex.EncodeToString(id)
}

// refusalLog reports refused Raft connections, at most once a minute per
// peer: a leader redials a refused follower many times a second.
type refusalLog struct {
	log *slog.Logger
	mu  sync.Mutex
	// last is when each peer was last reported.
	last map[string]time.Time
}

func (r *refusalLog) report(peer string, msg string, args ...any) {
	r.mu.Lock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	due := time.Since(r.last[peer]) >= time.Minute
	if due {
		r.last[peer] = time.Now()
	}
	r.mu.Unlock()
	if due {
		r.log.Error(msg, append([]any{"peer", peer}, args...)...)
	}
}
