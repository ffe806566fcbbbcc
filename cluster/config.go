package cluster

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemnode/idemnode/clock"
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
	// Bootstrap makes a node with no existing state form a one-node cluster
	// when it has no gossip address (a standalone node).
	Bootstrap bool

	// GossipAddr is where memberlist listens (TCP and UDP); empty runs a
	// standalone node without discovery. GossipAdvertise is what peers dial.
	GossipAddr      string
	GossipAdvertise string
	// GossipKeys encrypt gossip (AES-GCM, keys of 16, 24 or 32 bytes): the
	// first encrypts, every one decrypts, so a key can be rotated in without
	// a restart (see SetGossipKeys). Empty: plaintext gossip.
	GossipKeys [][]byte
	// PeerTLS, when set, runs the Raft transport over mutual TLS, and the
	// leader adds a voter only once it proved a certificate of the cluster
	// CA (peertls.go).
	PeerTLS *PeerTLS
	// GossipProfile selects memberlist timings: "lan" (default) or "local"
	// (faster failure detection, for loopback tests).
	GossipProfile string
	// Join lists gossip addresses of servers to join at start.
	Join []string
	// BootstrapExpect forms a new cluster once this many servers see each
	// other; 0 or 1 with no Join bootstraps a single-node cluster.
	BootstrapExpect int
	// DeadServerCleanup removes a server dead for this long from the Raft
	// configuration, only while a quorum of healthy voters remains; 0 is off.
	DeadServerCleanup time.Duration
	// ReconcileInterval is how often the leader reconciles membership with
	// the Raft configuration besides reacting to membership events.
	ReconcileInterval time.Duration

	// SnapshotThreshold and SnapshotInterval control Raft log compaction.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs is how many log entries stay after a snapshot, so a
	// briefly lagging follower catches up from the log instead of a snapshot.
	TrailingLogs uint64

	// ExpiryInterval is how often the leader proposes Expire; ExpiryLimit
	// bounds the records one Expire entry deletes.
	ExpiryInterval time.Duration
	ExpiryLimit    uint32

	// LogSegmentSize is the size each Raft log segment file is preallocated
	// to; 0 means DefaultLogSegmentSize.
	LogSegmentSize int

	// DiskStallTimeout makes the node report a storage fault (OnFatal)
	// when a Raft log write takes longer (see guardedLogStore); 0 disables
	// the watchdog.
	DiskStallTimeout time.Duration

	// StoreCacheSize, StoreMemTableSize and StoreKeyFilterSize bound the
	// store's memory (its block cache, one memtable of the two it may hold,
	// and its filter of stored keys); 0 means the store's defaults.
	StoreCacheSize     int64
	StoreMemTableSize  uint64
	StoreKeyFilterSize int64
	// StoreScrubPeriod is how long a background pass over the store's
	// tables, checking every block's checksum, takes (store.Scrubber);
	// 0 means store.DefaultScrubPeriod (a day), negative turns it off.
	StoreScrubPeriod time.Duration

	// Clock is the time this node stamps into the commands it proposes
	// (the state machine's only time, fsm/DESIGN.md) and that drives its
	// expiry ticker; nil means clock.Real(). Tests pass a fake they advance
	// past a lease or a TTL (internal/testclock), or shift one node's clock
	// with clock.Offset; only a fault build's `serve --fault-clock-offset`
	// shifts it from the command line.
	Clock clock.Clock
	// Faults are the fault-injection switches of the jepsen harness (a
	// stalled disk, the planted store bug). They exist only in a fault
	// build (`go build -tags faults`); in the release build Faults is
	// empty, so no setting can make a node deliberately incorrect.
	Faults Faults

	// Logger receives the node's logs, raft's and memberlist's included;
	// nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the node's Prometheus series; nil registers none.
	Metrics prometheus.Registerer

	// OnFatal is called, on the goroutine that hit it, with a storage fault
	// the node cannot run past (the error wraps ErrStorageFault): a Raft
	// log write failed or stalled, or the store failed a read or write. The
	// node is crash-only: the log's in-memory position may be ahead of the
	// disk, so only a restart, which reads the disk again, recovers it.
	// A process that runs one node ends itself here (idemnode serve exits
	// with code 3, and its supervisor restarts it); the package never ends
	// the process. Nil: the fault is sent on Fatal's channel instead, and
	// the caller must close the node.
	OnFatal func(error)
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
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.LogSegmentSize == 0 {
		c.LogSegmentSize = DefaultLogSegmentSize
	}
	if c.ExpiryInterval == 0 {
		c.ExpiryInterval = time.Second
	}
	if c.ExpiryLimit == 0 {
		c.ExpiryLimit = 1000
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 2 * time.Second
	}
	if c.BootstrapExpect < 0 || c.BootstrapExpect%2 == 0 && c.BootstrapExpect != 0 {
		return c, fmt.Errorf("bootstrap-expect must be 0 or an odd number, got %d", c.BootstrapExpect)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c, nil
}
