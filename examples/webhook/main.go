// Command webhook is a Standard Webhooks receiver behind the idemhttp
// middleware: the sender retries an event as often as it likes, each
// attempt with its own timestamp and signature, and the event is handled
// once, because the key is the event's webhook-id (docs/WEBHOOKS.md).
//
//	scripts/cluster.sh up 3
//	WEBHOOK_SECRET=whsec_... go run ./examples/webhook --cluster 127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400
//
// Endpoints: POST /hooks (a Standard Webhooks delivery: webhook-id,
// webhook-timestamp, webhook-signature) and GET /events/count?id=ID (how
// often the event was handled: 1, however often it was delivered).
package main

import (
	"context"
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

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/idemhttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv("WEBHOOK_SECRET"), os.Stderr)
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "webhook:", err)
		os.Exit(1)
	}
}

// usageError is a command line the flags refused.
type usageError struct{ error }

// run serves the receiver until ctx ends; secret is the endpoint's
// signing secret (whsec_ and base64).
func run(ctx context.Context, args []string, secret string, logOut io.Writer) error {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	fs.SetOutput(logOut)
	cluster := fs.String("cluster", "127.0.0.1:7400", "comma-separated gRPC addresses of idemnode nodes")
	listen := fs.String("listen", "127.0.0.1:8090", "HTTP address to serve on")
	ttl := fs.Duration("ttl", 96*time.Hour, "how long an event's record answers redeliveries: the sender's whole retry window")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return usageError{err}
	}
	key, err := parseSecret(secret)
	if err != nil {
		return fmt.Errorf("WEBHOOK_SECRET: %w", err)
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	c, err := client.New(client.Config{Addrs: strings.Split(*cluster, ","), Logger: log})
	if err != nil {
		return fmt.Errorf("idemnode client: %w", err)
	}
	defer c.Close()
	handler, err := newReceiver(c, key, *ttl, log)
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
	log.Info("webhook receiver listening", "addr", ln.Addr().String(), "cluster", *cluster)
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

// newReceiver guards POST /hooks with the event's webhook-id as its key.
// KeyFromHeader stores only a 2xx: a delivery whose signature fails is
// answered 401 and leaves no record, so it cannot stand in for the real
// event.
func newReceiver(c *client.Client, secret []byte, ttl time.Duration, log *slog.Logger) (http.Handler, error) {
	mw, err := idemhttp.New(idemhttp.Config{
		Client: c,
		// One sender, one tenant: the events are this endpoint's.
		Tenant: func(*http.Request) (string, error) { return "webhooks", nil },
		TTL:    ttl,
		Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("idemhttp: %w", err)
	}
	ev := newEvents(secret)
	mux := http.NewServeMux()
	mux.Handle("POST /hooks", mw.Handler(http.HandlerFunc(ev.handle), idemhttp.KeyFromHeader("webhook-id")))
	mux.HandleFunc("GET /events/count", ev.count)
	return mux, nil
}
