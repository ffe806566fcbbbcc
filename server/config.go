package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/netlimit"
	"github.com/idemnode/idemnode/rpc"
)

// Config is what a server runs with: `idemnode serve` fills it from its
// flags and IDEMNODE_* variables, a test from its options. Error messages
// name serve's flags, since that is where an operator sets them.
type Config struct {
	// NodeID names the node in the Raft configuration: unique and stable.
	NodeID string
	// DataDir holds the Raft log and the store.
	DataDir string

	// GRPCAddr is where the gRPC API listens; GRPCAdvertise is what clients
	// and peers dial (default: the bound GRPCAddr).
	GRPCAddr, GRPCAdvertise string
	// RaftAddr is where the Raft transport listens; RaftAdvertise is what
	// peers dial (default: RaftAddr).
	RaftAddr, RaftAdvertise string
	// GossipAddr is where memberlist listens (empty: a standalone node);
	// GossipAdvertise is what peers dial; GossipProfile is "lan" (default)
	// or "local" (loopback tests).
	GossipAddr, GossipAdvertise, GossipProfile string
	// Join lists gossip addresses of servers to join at start.
	Join []string
	// BootstrapExpect forms a new cluster once this many servers see each
	// other; 0 or 1 without Join bootstraps a single node.
	BootstrapExpect int
	// DeadServerCleanup removes servers dead this long (0: off).
	DeadServerCleanup time.Duration
	// ExpiryInterval is how often the leader expires records (0: 1s).
	ExpiryInterval time.Duration
	// SnapshotThreshold and SnapshotInterval control log compaction (0:
	// the node's defaults).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// DiskStallTimeout reports a storage fault when a Raft log write takes
	// longer (0: off).
	DiskStallTimeout time.Duration

	// CacheSize, MemTableSize and KeyFilterSize bound the store's memory
	// (0: the store's defaults); ScrubPeriod is its background checksum
	// pass (0: a day, negative: off).
	CacheSize, MemTableSize, KeyFilterSize int64
	ScrubPeriod                            time.Duration
	// MemoryLimit is the node's memory budget: Start refuses one that the
	// store's parts may outgrow and sets the Go runtime's soft limit below
	// it. The runtime's limit is the process's: 0 leaves it alone (a test
	// running many servers in one process).
	MemoryLimit int64

	// HTTPAddr serves /healthz, /readyz and /metrics, and with Pprof Go's
	// profiles (empty: off).
	HTTPAddr string
	Pprof    bool
	// APIAddr serves the HTTP/JSON API, with the gRPC port's TLS and
	// interceptors (empty: off).
	APIAddr string
	// LoopbackOnly refuses any listener address above that is not on
	// loopback (127.0.0.0/8, ::1, localhost). serve --dev sets it: a
	// development node serves in plaintext, which must not reach a network.
	LoopbackOnly bool

	// TLS is the transport security; Auth takes tenants from credentials.
	TLS  TLS
	Auth Auth
	// Limits are the API's limits (the zero value: rpc.DefaultLimits()).
	Limits rpc.Limits
	// Conns bound the client listeners' connections.
	Conns Conns
	// GRPCMaxStreams is the most calls in flight on one gRPC connection,
	// HandshakeTimeout the time a new one has for TLS and the HTTP/2
	// preface (0: gRPC's defaults).
	GRPCMaxStreams   uint32
	HandshakeTimeout time.Duration

	// Logger receives every log line, raft's and memberlist's included
	// (nil: slog.Default()).
	Logger *slog.Logger
	// OnFatal receives a storage fault on the goroutine that hit it (see
	// cluster.Config.OnFatal): serve ends the process there with code 3.
	// Nil: the fault arrives on Err, and the caller must close the server.
	OnFatal func(error)
	// RaftMetrics exports raft's timings into the server's registry. They
	// are process-wide (a go-metrics global sink): set it on one server
	// per process.
	RaftMetrics bool

	// Faults are the fault-injection settings of a fault build
	// (faults_on.go); the release build's Faults has no field.
	Faults Faults

	// What a test or an embedding program adds to the production wiring:
	// Node adjusts the node's configuration before it opens; APIOptions
	// and GRPCOptions are added to the rpc and gRPC servers' options;
	// Unary and Stream are chained after the server's own interceptors
	// (metrics, authentication, rate limits), on the gRPC port and the JSON
	// API alike.
	Node        func(*cluster.Config)
	APIOptions  []rpc.Option
	GRPCOptions []grpc.ServerOption
	Unary       []grpc.UnaryServerInterceptor
	Stream      []grpc.StreamServerInterceptor
}

// Conns bound what clients may hold of the client listeners (gRPC, JSON
// API, HTTP); the cluster's own nodes are exempt on the gRPC port.
type Conns struct {
	// MaxPerIP is the most connections one address holds on each listener
	// (0: no cap).
	MaxPerIP int
	// FDReserve is what the caps leave of the open-file limit (0: 1024, at
	// most half the limit).
	FDReserve int
	// ReadTimeout is the time an HTTP client has to send a whole request
	// (0: unbounded).
	ReadTimeout time.Duration
	// GRPC, API and HTTP are the listeners' caps; a Max of 0 is the
	// default (4096, 4096, 256). A cap not Set is lowered to fit the
	// open-file limit.
	GRPC, API, HTTP netlimit.Cap
}

// ConfigError is a configuration Start refuses: the caller's input, not a
// failure at run time (serve exits 2 on it, 1 on the others).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configError(err error) error {
	if err == nil {
		return nil
	}
	return &ConfigError{Err: err}
}

// maxTombstoneTTL bounds the tombstone TTL: a year past the longest TTL.
const maxTombstoneTTL = 365 * 24 * time.Hour

// withDefaults fills zero values.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.GossipProfile == "" {
		c.GossipProfile = "lan"
	}
	if c.Limits == (rpc.Limits{}) {
		c.Limits = rpc.DefaultLimits()
	}
	if c.Auth.CertTenant == "" {
		c.Auth.CertTenant = rpc.DefaultCertMapping
	}
	for _, l := range []struct {
		cap  *netlimit.Cap
		name string
		max  int
	}{{&c.Conns.GRPC, "--grpc-max-conns", 4096}, {&c.Conns.API, "--api-max-conns", 4096}, {&c.Conns.HTTP, "--http-max-conns", 256}} {
		if l.cap.Name == "" {
			l.cap.Name = l.name
		}
		if l.cap.Max == 0 {
			l.cap.Max = l.max
		}
	}
	return c
}

// check refuses what cannot work.
func (c *Config) check() error {
	if c.DataDir == "" {
		return errors.New("--data-dir is required (or --dev for a development node in ./idemnode-data)")
	}
	if c.NodeID == "" {
		return errors.New("--node-id is required")
	}
	if c.BootstrapExpect < 0 || (c.BootstrapExpect > 1 && c.BootstrapExpect%2 == 0) {
		return fmt.Errorf("--bootstrap-expect must be 1 or an odd number of servers, got %d", c.BootstrapExpect)
	}
	if err := c.checkLoopback(); err != nil {
		return err
	}
	if c.GossipProfile != "lan" && c.GossipProfile != "local" {
		return fmt.Errorf("--gossip-profile must be lan or local, got %q", c.GossipProfile)
	}
	l := c.Limits
	if l.MinLease <= 0 || l.MinLease > time.Hour || l.MinTTL <= 0 || l.MinTTL > 30*24*time.Hour {
		return fmt.Errorf("--min-lease must be in (0, 1h] and --min-ttl in (0, 720h]")
	}
	if l.TombstoneTTL < 0 || l.TombstoneTTL > maxTombstoneTTL {
		return fmt.Errorf("--tombstone-ttl must be in [0, %s], got %s", maxTombstoneTTL, l.TombstoneTTL)
	}
	if c.ExpiryInterval < 0 {
		return fmt.Errorf("--expiry-interval must be positive, got %s", c.ExpiryInterval)
	}
	if c.Conns.MaxPerIP < 0 || c.Conns.FDReserve < 0 || c.Conns.ReadTimeout < 0 {
		return fmt.Errorf("--max-conns-per-ip, --fd-reserve and --read-timeout must not be negative")
	}
	if err := c.Auth.check(c.TLS.ClientCA != ""); err != nil {
		return err
	}
	if err := c.checkMemory(); err != nil {
		return err
	}
	return c.TLS.check(c.GossipAddr != "")
}
