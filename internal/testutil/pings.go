package testutil

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// PingListener wraps a listener and counts the HTTP/2 PING frames, acks
// left out, that flow over its connections: those the server writes
// (ServerPings) and those its clients write (ClientPings). gRPC's bandwidth
// estimator sends one every round trip while data flows; keepalives are
// far rarer.
type PingListener struct {
	net.Listener
	server, client atomic.Int64
	counting       sync.WaitGroup
}

// Wait returns once every connection accepted so far is closed and its
// frames are counted.
func (l *PingListener) Wait() { l.counting.Wait() }

// ServerPings is how many PINGs the server sent so far.
func (l *PingListener) ServerPings() int64 { return l.server.Load() }

// ClientPings is how many PINGs the clients sent so far.
func (l *PingListener) ClientPings() int64 { return l.client.Load() }

func (l *PingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pc := &pingConn{Conn: c}
	pc.written = countPings(&l.counting, &l.server, nil)
	pc.read = countPings(&l.counting, &l.client, []byte(http2.ClientPreface))
	return pc, nil
}

// pingConn copies what one end writes and reads to frame counters.
type pingConn struct {
	net.Conn
	written, read *io.PipeWriter
	once          sync.Once
}

func (c *pingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	_, _ = c.written.Write(b[:n])
	return n, err
}

func (c *pingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	_, _ = c.read.Write(b[:n])
	return n, err
}

func (c *pingConn) Close() error {
	c.once.Do(func() {
		c.written.Close()
		c.read.Close()
	})
	return c.Conn.Close()
}

// countPings returns the writing end of a pipe whose reader parses HTTP/2
// frames (after skipping preface) and adds the non-ack PINGs to n. A
// parse error stops the count and drains the pipe, so a writer never waits.
func countPings(wg *sync.WaitGroup, n *atomic.Int64, preface []byte) *io.PipeWriter {
	r, w := io.Pipe()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _, _ = io.Copy(io.Discard, r) }()
		if len(preface) > 0 {
			got := make([]byte, len(preface))
			if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, preface) {
				return
			}
		}
		fr := http2.NewFramer(nil, r)
		fr.SetMaxReadFrameSize(1 << 24)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				n.Add(1)
			}
		}
	}()
	return w
}

// PingDialer dials like a grpc.WithContextDialer and counts the HTTP/2
// PINGs, acks left out, on its connections: those the client writes
// (ClientPings) and those the server sends it (ServerPings).
type PingDialer struct {
	server, client atomic.Int64
	counting       sync.WaitGroup
}

// Dial opens a TCP connection to addr whose frames d counts.
func (d *PingDialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pc := &pingConn{Conn: c}
	pc.written = countPings(&d.counting, &d.client, []byte(http2.ClientPreface))
	pc.read = countPings(&d.counting, &d.server, nil)
	return pc, nil
}

// ClientPings is how many PINGs the client sent so far.
func (d *PingDialer) ClientPings() int64 { return d.client.Load() }

// ServerPings is how many PINGs the server sent so far.
func (d *PingDialer) ServerPings() int64 { return d.server.Load() }

// Wait returns once every connection dialled so far is closed and its
// frames are counted.
func (d *PingDialer) Wait() { d.counting.Wait() }
