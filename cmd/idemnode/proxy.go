package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/proxy"
)

type proxyFlags struct {
	listen          string
	upstream        string
	cluster         string
	routes          string
	tenantHeader    string
	httpAddr        string
	upstreamTimeout time.Duration
	bodyTimeout     time.Duration
	timeout         time.Duration
	logLevel        string
	logFormat       string
	auth            clientAuth
	tls             clientTLS
	// conns bound the proxy's listeners (conns.go); proxyConns and
	// httpConns are their caps.
	conns                 connFlags
	proxyConns, httpConns *listenerCap
}

func newProxyCmd() *cobra.Command {
	var f proxyFlags
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Put Idempotency-Key semantics in front of any HTTP service",
		Long: "Run a reverse proxy that claims each guarded request's Idempotency-Key on the idemnode cluster\n" +
			"before the upstream sees it, stores the upstream's response, and answers every retry from\n" +
			"the record (docs/PROXY.md). Without --routes, every POST and PATCH is guarded and must carry\n" +
			"a key. The upstream gets the claim's fencing token in Idempotency-Token.\n\n" +
			"Exit codes: 0 after SIGTERM or SIGINT; 1 a failure; 2 a configuration error.",
		Example: `  idemnode proxy --listen 127.0.0.1:8080 --upstream http://127.0.0.1:9000 --cluster 10.0.0.1:7400,10.0.0.2:7400
  idemnode proxy --upstream http://127.0.0.1:9000 --routes routes.yaml --tls-ca ca.crt --auth-token-file proxy.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProxy(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address the proxy serves on")
	fl.StringVar(&f.upstream, "upstream", "", "URL of the service behind the proxy, e.g. http://127.0.0.1:9000 (required)")
	fl.StringVar(&f.cluster, "cluster", "127.0.0.1:7400", "gRPC addresses of idemnode servers, comma-separated")
	fl.StringVar(&f.routes, "routes", "", "routes file (YAML): what is guarded and how (default: every POST and PATCH, key required)")
	fl.StringVar(&f.tenantHeader, "tenant-header", "", "header carrying the tenant, set by the trusted gateway in front (without --routes)")
	fl.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8081", "HTTP address for /healthz, /readyz and /metrics (empty: off)")
	fl.DurationVar(&f.upstreamTimeout, "upstream-timeout", 60*time.Second, "wait for the upstream's response headers; then 504, and the key is released")
	fl.DurationVar(&f.bodyTimeout, "upstream-body-timeout", 5*time.Minute,
		"wait for the upstream's response body, from its headers to its end; then 504 (or a cut connection once it streams), and a status the route stores keeps the key with the not-kept marker")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long a claim may retry while the cluster has no leader before the 503")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	f.auth.register(fl)
	f.tls.register(fl)
	f.conns.register(fl, 60*time.Second, "")
	f.proxyConns = f.conns.listener("max-conns", 4096, "the most connections --listen holds")
	f.httpConns = f.conns.listener("http-max-conns", 256, "the most connections --http-addr holds")
	return cmd
}

// config turns the flags into the proxy's configuration; every error is a
// usage error (exit 2).
func (f *proxyFlags) config(log *slog.Logger) (proxy.Config, []string, error) {
	up, err := url.Parse(f.upstream)
	if err != nil || up.Host == "" || (up.Scheme != "http" && up.Scheme != "https") {
		return proxy.Config{}, nil, fmt.Errorf("--upstream: want an http:// or https:// URL with a host, got %q", f.upstream)
	}
	var addrs []string
	for _, a := range strings.Split(f.cluster, ",") {
		if a = strings.TrimSpace(a); a != "" {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return proxy.Config{}, nil, fmt.Errorf("--cluster: %q is not host:port", a)
			}
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return proxy.Config{}, nil, errors.New("--cluster: give at least one gRPC address")
	}
	routes := proxy.DefaultRoutes(f.tenantHeader)
	if f.routes != "" {
		if f.tenantHeader != "" {
			return proxy.Config{}, nil, errors.New("--tenant-header goes in the routes file (tenant.header) when --routes is given")
		}
		if routes, err = proxy.LoadRoutes(f.routes); err != nil {
			return proxy.Config{}, nil, err
		}
	}
	if f.upstreamTimeout <= 0 || f.bodyTimeout <= 0 || f.timeout <= 0 {
		return proxy.Config{}, nil, errors.New("--upstream-timeout, --upstream-body-timeout and --timeout must be positive")
	}
	return proxy.Config{Upstream: up, Routes: routes, UpstreamTimeout: f.upstreamTimeout, UpstreamBodyTimeout: f.bodyTimeout,
		Logger: log}, addrs, nil
}

func runProxy(ctx context.Context, f proxyFlags) error {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	cfg, addrs, err := f.config(log)
	if err != nil {
		return err
	}
	dial, err := f.auth.dialOptions()
	if err != nil {
		return err // a usage error that names its flag
	}
	creds, err := f.tls.credentials()
	if err != nil {
		return err // a usage error that names its flag
	}
	cl, err := client.New(client.Config{Addrs: addrs, TransportCredentials: creds, DialOptions: dial,
		Timeout: f.timeout, Logger: log})
	if err != nil {
		return fmt.Errorf("cluster client: %w", err)
	}
	defer cl.Close()
	cfg.Client = cl
	// From the moment the proxy listens, a signal stops it cleanly.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := proxy.Start(proxy.ServerConfig{Config: cfg, Listen: f.listen, HTTPAddr: f.httpAddr,
		Conns: proxy.Conns{MaxPerIP: f.conns.perIP, FDReserve: f.conns.fdReserve, ReadTimeout: f.conns.readTimeout,
			Proxy: f.conns.cap(f.proxyConns), HTTP: f.conns.cap(f.httpConns)}})
	var invalid *proxy.ConfigError
	switch {
	case errors.As(err, &invalid):
		return invalid
	case err != nil:
		return runtimeError{err}
	}
	log.Info("idemnode proxy serving", "listen", srv.Addr().String(), "upstream", cfg.Upstream.String(),
		"cluster", strings.Join(addrs, ","), "routes", len(cfg.Routes.Routes), "http", f.httpAddr)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-srv.Err():
		return runtimeError{err}
	}
	srv.Close() // lets guarded requests in flight record their answer before the client closes
	return nil
}
