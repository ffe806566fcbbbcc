// Command payments is a tiny payment API that uses idemnode through the
// idemhttp middleware: a retried POST /v1/charges with the same
// Idempotency-Key charges once and answers the same body.
//
//	scripts/cluster.sh up 3
//	go run ./examples/payments --cluster 127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400 --listen 127.0.0.1:8080
//
// On a cluster with mutual TLS and --auth (scripts/cluster.sh up --secure),
// add -tls-ca, -tls-cert and -tls-key: a certificate whose tenant the nodes
// trust as a delegate (--auth-delegate), since each request names its own
// tenant.
//
// Endpoints: POST /v1/charges ({"amount": int, "currency": string}; the
// tenant is the bearer token, demo auth) and GET /v1/stats (how many times
// the charge handler really ran). An amount of 402 is declined (a permanent
// failure, stored and replayed); 503 is a transient failure (released, so
// a retry charges again).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/idemnode/idemnode/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr)
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		// --help and -h: the usage is printed, and asking for it is no error.
	case errors.As(err, &usage):
		os.Exit(2) // the flag package printed the error and the usage
	case err != nil:
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
}

// usageError is a command line the flags refused.
type usageError struct{ error }

const usageText = `Usage: payments [flags]

A payment API behind the idemhttp middleware: POST /v1/charges with an
Idempotency-Key charges once however often it is retried. With a local
cluster (scripts/cluster.sh up 3):

  payments --cluster 127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400

or with the compose cluster (docker-compose.yml publishes gRPC on these):

  payments --cluster 127.0.0.1:17400,127.0.0.1:17410,127.0.0.1:17420

or with the secure local cluster (scripts/cluster.sh up --secure), as its
delegate credential, which may name every request's tenant:

  payments --cluster 127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400 \
    -tls-ca idemnode-cluster/pki/cluster-ca.crt \
    -tls-cert idemnode-cluster/pki/client-proxy.crt -tls-key idemnode-cluster/pki/client-proxy.key

Exit codes: 0 after a clean shutdown (or --help), 1 on an error, 2 for
bad flags.

Flags:
`

// run serves the API until ctx ends.
func run(ctx context.Context, args []string, logOut io.Writer) error {
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	fs.SetOutput(logOut)
	cluster := fs.String("cluster", "127.0.0.1:7400", "comma-separated gRPC addresses of idemnode nodes")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP address to serve on")
	wait := fs.Duration("wait", 5*time.Second, "how long a duplicate waits for the request in flight before 409")
	timeout := fs.Duration("timeout", 30*time.Second, "how long a call to the cluster may take, retries included, before the request fails")
	caFile := fs.String("tls-ca", "", "dial the cluster over TLS, verifying it with this PEM CA")
	certFile := fs.String("tls-cert", "", "dial the cluster over TLS, presenting this PEM client certificate")
	keyFile := fs.String("tls-key", "", "the PEM key of -tls-cert")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return usageError{err}
	}
	creds, err := clusterTLS(*caFile, *certFile, *keyFile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	c, err := client.New(client.Config{Addrs: strings.Split(*cluster, ","), TransportCredentials: creds, Timeout: *timeout, Logger: log})
	if err != nil {
		return fmt.Errorf("idemnode client: %w", err)
	}
	defer c.Close()
	handler, err := newAPI(c, *wait, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("payments API listening", "addr", ln.Addr().String(), "cluster", *cluster)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// clusterTLS is the TLS of the connections to the cluster, from the -tls-*
// flags; none of them is plaintext (nil).
func clusterTLS(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", caFile)
		}
	}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert and -tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}
