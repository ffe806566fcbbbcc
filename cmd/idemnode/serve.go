package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/internal/netlimit"
	"github.com/idemnode/idemnode/internal/tlsconfig"
	"github.com/idemnode/idemnode/rpc"
	"github.com/idemnode/idemnode/rpc/jsonapi"
	"github.com/idemnode/idemnode/store"
)

type serveFlags struct {
	cacheSize         int64
	memtableSize      int64
	scrubPeriod       time.Duration
	keyFilterSize     int64
	memoryLimit       int64
	nodeID            string
	dataDir           string
	grpcAddr          string
	raftAddr          string
	raftAdvertise     string
	httpAddr          string
	apiAddr           string
	grpcAdvertise     string
	gossipAddr        string
	gossipAdvertise   string
	gossipProfile     string
	join              []string
	bootstrapExpect   int
	deadCleanup       time.Duration
	dev               bool
	expiryInterval    time.Duration
	snapshotThreshold uint64
	snapshotInterval  time.Duration
	logLevel          string
	logFormat         string
	diskStallTimeout  time.Duration
	minLease          time.Duration
	minTTL            time.Duration
	tombstoneTTL      time.Duration
	pprof             bool
	auth              authFlags
	tls               tlsFlags
	// conns bound the client listeners (conns.go); grpcConns, apiConns and
	// httpConns are their caps.
	conns                          connFlags
	grpcConns, apiConns, httpConns *listenerCap
	grpcStreams                    uint32
	handshakeTimeout               time.Duration
	// faults are the hidden fault-injection flags, only in a fault build
	// (serve_faults.go); the release build has none (serve_nofaults.go).
	faults faultFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
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
			if err := f.auth.validate(cmd.Flags(), f.tls.clientCA != ""); err != nil {
				return err
			}
			if err := f.devDefaults(cmd.Flags()); err != nil {
				return err
			}
			return serve(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	f.auth.register(fl)
	fl.StringVar(&f.nodeID, "node-id", host, "unique, stable id of this node")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory for the Raft log and snapshots (required unless --dev)")
	fl.StringVar(&f.grpcAddr, "grpc-addr", "127.0.0.1:7400", "gRPC API listen address")
	fl.StringVar(&f.raftAddr, "raft-addr", "127.0.0.1:7401", "Raft listen address")
	fl.StringVar(&f.raftAdvertise, "raft-advertise", "", "Raft address peers dial (default: --raft-addr)")
	fl.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:7403", "HTTP address for /healthz, /readyz, /metrics (empty: off)")
	fl.StringVar(&f.apiAddr, "api-addr", "127.0.0.1:7404", "HTTP/JSON API listen address, with the gRPC port's TLS and auth (empty: off)")
	fl.StringVar(&f.grpcAdvertise, "grpc-advertise", "", "gRPC address clients and peers dial (default: --grpc-addr)")
	fl.StringVar(&f.gossipAddr, "gossip-addr", "127.0.0.1:7402", "memberlist (gossip) listen address, TCP and UDP")
	fl.StringVar(&f.gossipAdvertise, "gossip-advertise", "", "gossip address peers dial, host:port with a port from 1 to 65535 (default: --gossip-addr)")
	fl.StringVar(&f.gossipProfile, "gossip-profile", "lan", "gossip timings: lan, or local for loopback tests")
	fl.StringSliceVar(&f.join, "join", nil, "gossip addresses of servers to join (comma-separated)")
	fl.IntVar(&f.bootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many servers see each other (odd)")
	fl.DurationVar(&f.deadCleanup, "dead-server-cleanup", 0, "remove servers dead this long while a quorum remains (0: off)")
	fl.BoolVar(&f.dev, "dev", false, "single development node: plaintext, data in ./idemnode-data, no gossip port; "+
		"--raft-addr, --http-addr and --api-addr follow --grpc-addr (port +1, +3, +4) unless given")
	fl.DurationVar(&f.expiryInterval, "expiry-interval", time.Second, "how often the leader expires records past their TTL")
	fl.Uint64Var(&f.snapshotThreshold, "snapshot-threshold", 8192, "log entries between snapshots")
	fl.DurationVar(&f.snapshotInterval, "snapshot-interval", 2*time.Minute, "how often to check whether to snapshot")
	fl.Var(newByteSize(&f.cacheSize, store.DefaultCacheSize), "cache-size",
		"the store's block cache (e.g. 128MiB); with the memtables it bounds the node's memory, whatever it stores")
	fl.Var(newByteSize(&f.memtableSize, store.DefaultMemTableSize), "memtable-size",
		"one of the store's memtables (e.g. 32MiB; up to four are held)")
	fl.Var(newByteSize(&f.keyFilterSize, store.DefaultKeyFilterSize), "key-filter-size",
		"the in-memory filter that answers lookups of fresh keys without the disk (e.g. 32MiB; about 10 bits a stored "+
			"record keeps it sharp; two are held while it is rebuilt)")
	fl.Var(newByteSize(&f.memoryLimit, DefaultMemoryLimit), "memory-limit",
		"the node's memory budget, whatever it stores (e.g. 512MiB): the Go runtime collects garbage before passing it, "+
			"and the start is refused if the store's parts above may outgrow it; leave the page cache room beside it")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.DurationVar(&f.scrubPeriod, "store-scrub-period", store.DefaultScrubPeriod,
		"read every table of the store in the background, checking its checksums, once per this period (negative: off)")
	fl.DurationVar(&f.diskStallTimeout, "disk-stall-timeout", 20*time.Second,
		"exit when a Raft log write takes longer, so a healthy node can lead (0: off)")
	fl.DurationVar(&f.minLease, "min-lease", time.Second, "smallest lease a claim may ask for")
	fl.DurationVar(&f.minTTL, "min-ttl", time.Minute, "smallest TTL a claim may ask for")
	fl.DurationVar(&f.tombstoneTTL, "tombstone-ttl", 0, "keep a tombstone this long after a record's TTL, so a late retry is answered EXPIRED instead of running again (0: none; payments: 720h)")
	fl.BoolVar(&f.pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on --http-addr")
	f.tls.register(fl)
	f.conns.register(fl, 30*time.Second, "; the cluster's own nodes are exempt")
	f.grpcConns = f.conns.listener("grpc", "grpc-max-conns", 4096,
		"the most connections the gRPC port holds; clients' over it are closed at once, the cluster's nodes' never")
	f.apiConns = f.conns.listener("api", "api-max-conns", 4096, "the most connections the JSON API port holds")
	f.httpConns = f.conns.listener("http", "http-max-conns", 256, "the most connections --http-addr holds")
	fl.Uint32Var(&f.grpcStreams, "grpc-max-streams", 16384, "the most calls in flight on one gRPC connection, "+
		"a client's further calls queue on its side (above the node's 10 000 waits: one proxy may hold them all)")
	fl.DurationVar(&f.handshakeTimeout, "grpc-handshake-timeout", 10*time.Second,
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
	if !fl.Changed("gossip-addr") && !fl.Changed("join") {
		f.gossipAddr = ""
	}
	if !fl.Changed("grpc-addr") {
		return nil
	}
	host, port, err := net.SplitHostPort(f.grpcAddr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p == 0 || p > 65535-4 {
		return fmt.Errorf("--dev needs --grpc-addr as host:port with a fixed port below 65532, got %q", f.grpcAddr)
	}
	if !fl.Changed("raft-addr") {
		f.raftAddr = net.JoinHostPort(host, strconv.Itoa(p+1))
	}
	if !fl.Changed("http-addr") {
		f.httpAddr = net.JoinHostPort(host, strconv.Itoa(p+3))
	}
	if !fl.Changed("api-addr") {
		f.apiAddr = net.JoinHostPort(host, strconv.Itoa(p+4))
	}
	return nil
}

func (f *serveFlags) validate() error {
	if f.dev && f.dataDir == "" {
		f.dataDir = "idemnode-data"
	}
	if f.dataDir == "" {
		return errors.New("--data-dir is required (or --dev for a development node in ./idemnode-data)")
	}
	if f.nodeID == "" {
		return errors.New("--node-id is required")
	}
	if f.bootstrapExpect < 0 || (f.bootstrapExpect > 1 && f.bootstrapExpect%2 == 0) {
		return fmt.Errorf("--bootstrap-expect must be 1 or an odd number of servers, got %d", f.bootstrapExpect)
	}
	if f.gossipProfile != "lan" && f.gossipProfile != "local" {
		return fmt.Errorf("--gossip-profile must be lan or local, got %q", f.gossipProfile)
	}
	if f.minLease <= 0 || f.minLease > time.Hour || f.minTTL <= 0 || f.minTTL > 30*24*time.Hour {
		return fmt.Errorf("--min-lease must be in (0, 1h] and --min-ttl in (0, 720h]")
	}
	if f.tombstoneTTL < 0 || f.tombstoneTTL > maxTombstoneTTL {
		return fmt.Errorf("--tombstone-ttl must be in [0, %s], got %s", maxTombstoneTTL, f.tombstoneTTL)
	}
	if f.expiryInterval <= 0 {
		return fmt.Errorf("--expiry-interval must be positive, got %s", f.expiryInterval)
	}
	if err := f.checkMemory(); err != nil {
		return err
	}
	return f.tls.check(f.gossipAddr != "", f.dev)
}

// maxTombstoneTTL bounds --tombstone-ttl: a year past the longest TTL.
const maxTombstoneTTL = 365 * 24 * time.Hour

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

// serve wires a node, the gRPC API and the HTTP endpoints, and runs them
// until SIGINT or SIGTERM.
func serve(ctx context.Context, f serveFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	applyMemoryLimit(f.memoryLimit, log)
	f.apiConns.on, f.httpConns.on = f.apiAddr != "", f.httpAddr != ""
	if err := f.conns.fit(log); err != nil {
		return err
	}
	sec, err := loadSecurity(f.tls, f.gossipAddr != "", log)
	if err != nil {
		return err
	}
	grpcLn, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return runtimeError{fmt.Errorf("listen grpc: %w", err)}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if sec.node != nil {
		reg.MustRegister(tlsconfig.NewExpiryCollector(sec.node))
	}
	if err := cluster.ExportRaftMetrics(reg); err != nil {
		grpcLn.Close()
		return runtimeError{err}
	}
	node, err := cluster.Open(cluster.Config{
		NodeID:             f.nodeID,
		DataDir:            f.dataDir,
		RaftAddr:           f.raftAddr,
		RaftAdvertise:      f.raftAdvertise,
		GRPCAdvertise:      orDefault(f.grpcAdvertise, grpcLn.Addr().String()),
		Bootstrap:          f.bootstrapExpect <= 1 && len(f.join) == 0,
		GossipAddr:         f.gossipAddr,
		GossipAdvertise:    f.gossipAdvertise,
		GossipProfile:      f.gossipProfile,
		GossipKeys:         sec.gossipKeys,
		PeerTLS:            sec.peerTLS(),
		Join:               f.join,
		BootstrapExpect:    f.bootstrapExpect,
		DeadServerCleanup:  f.deadCleanup,
		SnapshotThreshold:  f.snapshotThreshold,
		SnapshotInterval:   f.snapshotInterval,
		ExpiryInterval:     f.expiryInterval,
		Clock:              f.faults.clock(),
		DiskStallTimeout:   f.diskStallTimeout,
		Faults:             f.faults.cluster(),
		StoreCacheSize:     f.cacheSize,
		StoreMemTableSize:  uint64(f.memtableSize),
		StoreKeyFilterSize: f.keyFilterSize,
		StoreScrubPeriod:   f.scrubPeriod,
		Logger:             log,
		Metrics:            reg,
		// Crash-only: a storage fault ends the process at once, before
		// raft goes on from a log position the disk may not hold.
		OnFatal: func(error) { os.Exit(exitStorage) },
	})
	if err != nil {
		grpcLn.Close()
		return runtimeError{fmt.Errorf("open node: %w", err)}
	}
	defer node.Close()

	apiMetrics := rpc.NewMetrics(reg)
	opts := []rpc.Option{rpc.WithForwardSource(grpcLn.Addr().(*net.TCPAddr).IP), rpc.WithMetrics(apiMetrics, reg)}
	opts = append(opts, sec.rpcOptions(f.auth.enabled)...)
	bugs, err := f.faults.rpcOptions(log)
	if err != nil {
		return err
	}
	opts = append(opts, bugs...)
	limits := rpc.DefaultLimits()
	limits.MinLease, limits.MinTTL, limits.TombstoneTTL = f.minLease, f.minTTL, f.tombstoneTTL
	f.auth.applyLimits(&limits)
	unary, stream, tokens, err := f.auth.interceptors(limits.MaxTenant, log)
	if err != nil {
		return err
	}
	api := rpc.NewServer(node, limits, log, opts...)
	unary = append([]grpc.UnaryServerInterceptor{apiMetrics.UnaryInterceptor()}, unary...)
	serverOpts := append(append(rpc.ServerOptions(), sec.serverOptions()...), limits.ServerOptions()...)
	serverOpts = append(serverOpts, rpc.ConnectionOptions(f.grpcStreams, f.handshakeTimeout)...)
	g := grpc.NewServer(append(serverOpts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))...)
	api.Register(g)
	jsonAPI, err := jsonapi.New(jsonapi.Config{Idempotency: api, Admin: api, Unary: unary, Stream: stream,
		MaxMessageBytes: limits.MaxMessageBytes})
	if err != nil {
		return runtimeError{err}
	}
	errc := make(chan error, 3)
	connMetrics := netlimit.NewMetrics(reg)
	grpcLimits := f.conns.config(f.grpcConns, connMetrics)
	grpcLimits.Exempt = rpc.PeerAddrs(node)
	go func() { errc <- g.Serve(netlimit.Limit(grpcLn, grpcLimits)) }()
	httpSrv, err := startHTTP(f.httpAddr, httpHandler(node, reg, f.pprof), f.conns.config(f.httpConns, connMetrics),
		f.conns.readTimeout, errc)
	if err != nil {
		return runtimeError{err}
	}
	apiSrv, err := startAPI(f.apiAddr, jsonAPI, sec.jsonTLS(), f.conns.config(f.apiConns, connMetrics), f.conns.readTimeout, errc)
	if err != nil {
		return runtimeError{err}
	}

	log.Info("idemnode serving", "node", f.nodeID, "grpc", grpcLn.Addr().String(), "raft", node.RaftAddr(),
		"http", f.httpAddr, "api", f.apiAddr, "data", f.dataDir, "tls", sec.node != nil)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go followReadiness(ctx, node, api)
	f.auth.watchTokens(ctx, tokens, log)
	go sec.watch(ctx, node, log)
	var fatal error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-errc:
		return runtimeError{fmt.Errorf("server: %w", err)}
	case fatal = <-node.Fatal():
		// The node cannot go on (its data dir holds another cluster's
		// state): leave gossip and stop like a SIGTERM, then say why.
	}
	// Hand leadership over and leave gossip while the API still answers, so
	// in-flight calls finish or are forwarded to the new leader.
	if err := node.Leave(5 * time.Second); err != nil {
		log.Warn("leave", "err", err)
	}
	api.Shutdown()
	stopHTTPServer(apiSrv, 5*time.Second)
	stopGRPC(g, 5*time.Second)
	if httpSrv != nil {
		httpSrv.Close()
	}
	if err := node.Close(); err != nil {
		return runtimeError{err}
	}
	if fatal != nil {
		return runtimeError{fatal}
	}
	return nil
}

// stopGRPC drains in-flight calls, then cuts what is left after grace.
func stopGRPC(g *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		g.Stop()
	}
}

// startHTTP serves the operator endpoints h on addr (nothing when addr is
// empty) within the connection caps of lim.
func startHTTP(addr string, h http.Handler, lim netlimit.Config, readTimeout time.Duration, errc chan<- error) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := listenLimited(addr, lim)
	if err != nil {
		return nil, err
	}
	srv := newHTTPServer(h, 5*time.Second, readTimeout)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	}()
	return srv, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// followReadiness keeps the gRPC health service in step with /readyz: a
// node serves once it knows a leader and has applied what it knows to be
// committed.
func followReadiness(ctx context.Context, node *cluster.Node, api *rpc.Server) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		api.SetServing(node.Ready() == nil)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
