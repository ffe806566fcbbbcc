package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemnode/idemnode/rpc"
	idemserver "github.com/idemnode/idemnode/server"
	"github.com/idemnode/idemnode/store"
)

// serveFlags are serve's flags: the fields of a server.Config, and what
// the command line adds (--dev, the log's level and format).
type serveFlags struct {
	cfg       idemserver.Config
	dev       bool
	logLevel  string
	logFormat string
	auth      authFlags
	// conns bound the client listeners (conns.go); grpcConns, apiConns and
	// httpConns are their caps.
	conns                          connFlags
	grpcConns, apiConns, httpConns *listenerCap
	// faults are the hidden fault-injection flags, only in a fault build
	// (serve_faults.go); the release build has none (serve_nofaults.go).
	faults faultFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	c := &f.cfg
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an idemnode server",
		Example: `  idemnode serve --dev      # one plaintext node on 127.0.0.1:7400, data in ./idemnode-data
  idemnode serve --node-id node1 --data-dir /var/lib/idemnode --grpc-addr 10.0.0.1:7400 \
    --raft-addr 10.0.0.1:7401 --gossip-addr 10.0.0.1:7402 --http-addr 10.0.0.1:7403 \
    --bootstrap-expect 3 --join 10.0.0.2:7402,10.0.0.3:7402 \
    --tls-cert node1.crt --tls-key node1.key --peer-ca cluster-ca.crt --gossip-key-file gossip.keys`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.auth.validate(cmd.Flags()); err != nil {
				return err
			}
			if err := f.devDefaults(cmd.Flags()); err != nil {
				return err
			}
			return clientEnvHint(cmd.Flags(), serve(cmd.Context(), f))
		},
	}
	fl := cmd.Flags()
	f.auth.register(fl)
	fl.StringVar(&c.NodeID, "node-id", host, "unique, stable id of this node")
	fl.StringVar(&c.DataDir, "data-dir", "", "directory for the Raft log and snapshots (required unless --dev)")
	fl.StringVar(&c.GRPCAddr, "grpc-addr", "127.0.0.1:7400", "gRPC API listen address")
	fl.StringVar(&c.RaftAddr, "raft-addr", "127.0.0.1:7401", "Raft listen address")
	fl.StringVar(&c.RaftAdvertise, "raft-advertise", "", "Raft address peers dial (default: --raft-addr)")
	fl.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:7403", "HTTP address for /healthz, /readyz, /metrics (empty: off)")
	fl.StringVar(&c.APIAddr, "api-addr", "127.0.0.1:7404", "HTTP/JSON API listen address, with the gRPC port's TLS and auth (empty: off)")
	fl.StringVar(&c.GRPCAdvertise, "grpc-advertise", "", "gRPC address clients and peers dial (default: --grpc-addr)")
	fl.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:7402", "memberlist (gossip) listen address, TCP and UDP")
	fl.StringVar(&c.GossipAdvertise, "gossip-advertise", "", "gossip address peers dial, host:port with a port from 1 to 65535 (default: --gossip-addr)")
	fl.StringVar(&c.GossipProfile, "gossip-profile", "lan", "gossip timings: lan, or local for loopback tests")
	fl.StringSliceVar(&c.Join, "join", nil, "gossip addresses of servers to join (comma-separated)")
	fl.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many servers see each other (odd)")
	fl.DurationVar(&c.DeadServerCleanup, "dead-server-cleanup", 0, "remove servers dead this long while a quorum remains (0: off)")
	fl.BoolVar(&f.dev, "dev", false, "single development node: plaintext on loopback only (a listener off loopback is refused), data in ./idemnode-data, no gossip port; "+
		"--raft-addr, --http-addr and --api-addr follow --grpc-addr (port +1, +3, +4) unless given")
	fl.DurationVar(&c.ExpiryInterval, "expiry-interval", time.Second, "how often the leader expires records past their TTL")
	fl.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", 8192, "log entries between snapshots")
	fl.DurationVar(&c.SnapshotInterval, "snapshot-interval", 2*time.Minute, "how often to check whether to snapshot")
	fl.Var(newByteSize(&c.CacheSize, store.DefaultCacheSize), "cache-size",
		"the store's block cache (e.g. 128MiB); with the memtables it bounds the node's memory, whatever it stores")
	fl.Var(newByteSize(&c.MemTableSize, store.DefaultMemTableSize), "memtable-size",
		"one of the store's memtables (e.g. 32MiB; up to four are held)")
	fl.Var(newByteSize(&c.KeyFilterSize, store.DefaultKeyFilterSize), "key-filter-size",
		"the in-memory filter that answers lookups of fresh keys without the disk (e.g. 32MiB; about 10 bits a stored "+
			"record keeps it sharp; two are held while it is rebuilt)")
	fl.Var(newByteSize(&c.MemoryLimit, idemserver.DefaultMemoryLimit), "memory-limit",
		"the node's memory budget, whatever it stores (e.g. 512MiB): the Go runtime collects garbage before passing it, "+
			"and the start is refused if the store's parts above may outgrow it; leave the page cache room beside it")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.DurationVar(&c.ScrubPeriod, "store-scrub-period", store.DefaultScrubPeriod,
		"read every table of the store in the background, checking its checksums, once per this period (negative: off)")
	fl.DurationVar(&c.DiskStallTimeout, "disk-stall-timeout", 20*time.Second,
		"exit when a Raft log write takes longer, so a healthy node can lead (0: off)")
	limits := rpc.DefaultLimits()
	c.Limits = limits
	fl.DurationVar(&c.Limits.MinLease, "min-lease", limits.MinLease, "smallest lease a claim may ask for")
	fl.DurationVar(&c.Limits.MinTTL, "min-ttl", limits.MinTTL, "smallest TTL a claim may ask for")
	fl.DurationVar(&c.Limits.TombstoneTTL, "tombstone-ttl", 0, "keep a tombstone this long after a record's TTL, so a late retry is answered EXPIRED instead of running again (0: none; payments: 720h)")
	fl.BoolVar(&c.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on --http-addr")
	registerTLS(fl, &c.TLS)
	f.conns.register(fl, 30*time.Second, "; the cluster's own nodes are exempt")
	f.grpcConns = f.conns.listener("grpc-max-conns", 4096,
		"the most connections the gRPC port holds; clients' over it are closed at once, the cluster's nodes' never")
	f.apiConns = f.conns.listener("api-max-conns", 4096, "the most connections the JSON API port holds")
	f.httpConns = f.conns.listener("http-max-conns", 256, "the most connections --http-addr holds")
	fl.Uint32Var(&c.GRPCMaxStreams, "grpc-max-streams", 16384, "the most calls in flight on one gRPC connection, "+
		"a client's further calls queue on its side (above the node's 10 000 waits: one proxy may hold them all)")
	fl.DurationVar(&c.HandshakeTimeout, "grpc-handshake-timeout", 10*time.Second,
		"time a new gRPC connection has for its TLS handshake and HTTP/2 preface; then it is closed")
	f.faults.register(fl)
	cmd.Long = "Run an idemnode server.\n\n" +
		"Exit codes: 0 after a clean shutdown (SIGTERM, SIGINT); 1 a failure; 2 a configuration\n" +
		"error; 3 a Raft log write failed or stalled (restart it; docs/OPERATIONS.md).\n\n" + envHelp(fl)
	return cmd
}

// devDefaults fits --dev to one machine: a single node uses no gossip, so
// it binds no gossip port unless --gossip-addr or --join asks for one, and
// the Raft and HTTP ports follow a --grpc-addr given without them, so two
// development nodes run side by side with only --grpc-addr and --data-dir
// apart.
func (f *serveFlags) devDefaults(fl *pflag.FlagSet) error {
	if !f.dev {
		return nil
	}
	c := &f.cfg
	if c.DataDir == "" {
		c.DataDir = "idemnode-data"
	}
	// A development node serves in plaintext, so on loopback only: a
	// listener given another address is refused (Config.LoopbackOnly).
	c.TLS.Insecure = true
	c.LoopbackOnly = true
	if !fl.Changed("gossip-addr") && !fl.Changed("join") {
		c.GossipAddr = ""
	}
	if !fl.Changed("grpc-addr") {
		return nil
	}
	host, port, err := net.SplitHostPort(c.GRPCAddr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p == 0 || p > 65535-4 {
		return fmt.Errorf("--dev needs --grpc-addr as host:port with a fixed port below 65532, got %q", c.GRPCAddr)
	}
	if !fl.Changed("raft-addr") {
		c.RaftAddr = net.JoinHostPort(host, strconv.Itoa(p+1))
	}
	if !fl.Changed("http-addr") {
		c.HTTPAddr = net.JoinHostPort(host, strconv.Itoa(p+3))
	}
	if !fl.Changed("api-addr") {
		c.APIAddr = net.JoinHostPort(host, strconv.Itoa(p+4))
	}
	return nil
}

// config is the server.Config of the flags.
func (f *serveFlags) config(log *slog.Logger) (idemserver.Config, error) {
	c := f.cfg
	if c.ExpiryInterval <= 0 {
		return c, fmt.Errorf("--expiry-interval must be positive, got %s", c.ExpiryInterval)
	}
	c.Logger = log
	c.RaftMetrics = true // one server in this process
	// Crash-only: a storage fault ends the process at once, before raft
	// goes on from a log position the disk may not hold.
	c.OnFatal = func(error) { os.Exit(exitStorage) }
	c.Auth = f.auth.Auth
	c.Limits.TenantMaxKeys, c.Limits.TenantMaxBytes = f.auth.maxKeys, f.auth.maxBytes
	c.Conns = idemserver.Conns{MaxPerIP: f.conns.perIP, FDReserve: f.conns.fdReserve, ReadTimeout: f.conns.readTimeout,
		GRPC: f.conns.cap(f.grpcConns), API: f.conns.cap(f.apiConns), HTTP: f.conns.cap(f.httpConns)}
	c.Faults = f.faults.config()
	return c, nil
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// serve starts a server.Config of the flags and runs it until SIGINT or
// SIGTERM; SIGHUP re-reads its certificates, gossip keys and tokens.
func serve(ctx context.Context, f serveFlags) error {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	cfg, err := f.config(log)
	if err != nil {
		return err
	}
	// SIGHUP is caught from the start: a reload asked for while the node
	// opens must not end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := idemserver.Start(ctx, cfg)
	var invalid *idemserver.ConfigError
	switch {
	case errors.As(err, &invalid):
		return invalid
	case err != nil:
		return runtimeError{err}
	}
	var fatal error
	for fatal == nil && ctx.Err() == nil {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
		case <-hup:
			srv.Reload() // logged by the server
		case fatal = <-srv.Err():
			// A listener failed, or the node cannot go on (its data dir
			// holds another cluster's state): leave gossip and stop like
			// a SIGTERM, then say why.
		}
	}
	if err := srv.Close(); err != nil {
		return runtimeError{err}
	}
	if fatal != nil {
		return runtimeError{fmt.Errorf("server: %w", fatal)}
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
