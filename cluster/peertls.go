package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// PeerTLS secures the Raft transport with mutual TLS. Server configures
// the listener and must require and verify client certificates against the
// cluster CA; Client configures dials and must verify the server's
// certificate against it and present this node's own (internal/tlsconfig
// builds both from the node's files).
type PeerTLS struct {
	Server, Client *tls.Config
}

// tlsStreamLayer is the bound stream layer (transport.go) with TLS on both
// ends, so the source address stays the node's own and partitions by
// address still cut Raft.
type tlsStreamLayer struct {
	*boundStreamLayer
	cfg PeerTLS
}

// Accept returns the next connection, to be handshaken by its first read
// in raft's per-connection goroutine: a slow or hostile client then holds
// only that goroutine, never the accept loop.
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := s.boundStreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, s.cfg.Server), nil
}

// Dial connects to a peer and completes the handshake within timeout, so a
// peer without a certificate of the cluster CA fails here, by name.
func (s *tlsStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.boundStreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, s.cfg.Client)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// verifyPeer proves that the server at a Raft address holds a certificate
// of the cluster CA, and not the state of another cluster, before it gets
// a vote: gossip only shows that it knows the gossip key, and a voter
// nobody can replicate to would weaken the quorum. It dials through the
// whole stream layer, so the identity handshake runs too. Without peer TLS
// and before this cluster has an identity there is nothing to prove.
func (n *Node) verifyPeer(addr string) error {
	if n.cfg.PeerTLS == nil && len(n.Machine().Cluster()) == 0 {
		return nil
	}
	c, err := n.stream.Dial(raft.ServerAddress(addr), 5*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// verifyOther is verifyPeer for a member other than this node.
func (n *Node) verifyOther(m Member) error {
	if m.ID == n.cfg.NodeID {
		return nil
	}
	return n.verifyPeer(m.Raft)
}

// newStreamLayer is the Raft network layer: bound to the node's IP, and
// mutual TLS when configured.
func newStreamLayer(cfg Config) (raft.StreamLayer, error) {
	bound, err := newBoundStreamLayer(cfg.RaftAddr, cfg.RaftAdvertise)
	if err != nil {
		return nil, err
	}
	if cfg.PeerTLS == nil {
		return bound, nil
	}
	if cfg.PeerTLS.Server == nil || cfg.PeerTLS.Client == nil {
		bound.Close()
		return nil, fmt.Errorf("peer TLS needs both a server and a client configuration")
	}
	return &tlsStreamLayer{boundStreamLayer: bound, cfg: *cfg.PeerTLS}, nil
}
