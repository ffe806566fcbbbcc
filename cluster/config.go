package cluster

import (
	"fmt"
	"log/slog"
	"time"
)

// Config configures one node.
type Config struct {
	// NodeID names the node in the Raft configuration; it must be unique
	// and stable across restarts.
	NodeID string
	// DataDir holds the Raft log, stable store and snapshots.
	DataDir string
	// RaftAddr is where the Raft transport listens; RaftAdvertise is what
	// peers dial (defaults to RaftAddr when that is not a wildcard).
	RaftAddr      string
	RaftAdvertise string
	// GRPCAdvertise is this node's client-facing gRPC address, reported as
	// the leader address to clients.
	GRPCAdvertise string
	// Bootstrap makes a node with no existing state form a one-node cluster.
	Bootstrap bool

	// SnapshotThreshold and SnapshotInterval control Raft log compaction.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// SnapshotRetain is how many snapshots are kept on disk.
	SnapshotRetain int

	// ExpiryInterval is how often the leader proposes Expire; ExpiryLimit
	// bounds the records one Expire entry deletes.
	ExpiryInterval time.Duration
	ExpiryLimit    uint32

	// ClockOffset shifts the time this node stamps into commands. It is a
	// fault-injection knob for skew tests and is zero in production.
	ClockOffset time.Duration

	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults fills zero values and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.NodeID == "" {
		return c, fmt.Errorf("node id is required")
	}
	if c.DataDir == "" {
		return c, fmt.Errorf("data dir is required")
	}
	if c.RaftAddr == "" {
		return c, fmt.Errorf("raft address is required")
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 2 * time.Minute
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = 2
	}
	if c.ExpiryInterval == 0 {
		c.ExpiryInterval = time.Second
	}
	if c.ExpiryLimit == 0 {
		c.ExpiryLimit = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
