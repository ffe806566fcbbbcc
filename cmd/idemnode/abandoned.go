package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// eventView is one event of the feed of abandoned claims as printed.
type eventView struct {
	Seq            uint64 `json:"seq"`
	Kind           string `json:"kind"`
	Resolution     string `json:"resolution,omitempty"`
	ResolvesSeq    uint64 `json:"resolves_seq,omitempty"`
	Tenant         string `json:"tenant"`
	Scope          string `json:"scope"`
	Key            string `json:"key"`
	Token          uint64 `json:"token"`
	Attempt        uint32 `json:"attempt"`
	RecoveryPoint  string `json:"recovery_point,omitempty"`
	LeaseExpiresAt string `json:"lease_expires_at"`
	At             string `json:"at"`
	KeepUntil      string `json:"keep_until"`
}

// abandonedList is what `abandoned` prints without --watch.
type abandonedList struct {
	Abandoned []eventView `json:"abandoned"`
}

func newAbandonedCmd() *cobra.Command {
	var c clientFlags
	var watch, all bool
	var after uint64
	cmd := &cobra.Command{
		Use:   "abandoned",
		Short: "List the claims abandoned now, or watch the feed of abandoned claims",
		Long: `A PENDING record whose lease ran out without complete or release is abandoned:
nobody knows whether its side effect ran. Without --watch, list the records abandoned
now (each as the event that reported it). With --watch, stream the feed from --after
on, one event per line (abandoned, then resolved when it is completed, released,
taken over or expired), until interrupted; restart with --after set to the last seq
printed and nothing is missed or repeated (docs/API.md, "Abandoned claims").`,
		Example: `  idemnode abandoned --tenant acme -o json
  idemnode abandoned --watch --after 1042 -o json
  idemnode abandoned --all-tenants --watch    # an admin identity
  # exit 0; 1 when events after --after were pruned (list, then watch from 0);
  # 7 when --after is past the cluster's last event (list, then watch from it)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			if all && c.tenant != "" {
				return fmt.Errorf("--all-tenants and --tenant exclude each other")
			}
			if all {
				c.tenant = "*"
			}
			if watch {
				return c.watchAbandoned(cmd.Context(), after)
			}
			return c.listAbandoned(cmd.Context(), after)
		},
	}
	c.register(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&c.tenant, "tenant", "", "tenant whose claims to show (default: the credentials' tenant)")
	fl.BoolVar(&all, "all-tenants", false, "every tenant's claims (an admin identity)")
	fl.BoolVar(&watch, "watch", false, "stream the feed until interrupted")
	fl.Uint64Var(&after, "after", 0, "start after this seq (the last one seen)")
	return cmd
}

func (c *clientFlags) listAbandoned(ctx context.Context, after uint64) error {
	out := abandonedList{Abandoned: []eventView{}}
	err := c.sdk(ctx, func(ctx context.Context, cl *client.Client) error {
		for cursor := after; ; {
			page, next, err := cl.ListAbandoned(ctx, c.tenant, cursor, 1000)
			if err != nil {
				return err
			}
			for _, ev := range page {
				out.Abandoned = append(out.Abandoned, eventViewOf(ev))
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.print(out, idempb.Outcome_OUTCOME_OK)
	}
	for _, ev := range out.Abandoned {
		printEventText(ev)
	}
	return nil
}

// eventViewOf is an event of the feed as printed.
func eventViewOf(ev client.AbandonedEvent) eventView {
	return eventView{Seq: ev.Seq, Kind: ev.Kind, Resolution: ev.Resolution, ResolvesSeq: ev.ResolvesSeq,
		Tenant: ev.ID.Tenant, Scope: ev.ID.Scope, Key: ev.ID.Key, Token: ev.Token, Attempt: ev.Attempt,
		RecoveryPoint: ev.RecoveryPoint, LeaseExpiresAt: timeString(ev.LeaseExpiresAt), At: timeString(ev.At),
		KeepUntil: timeString(ev.KeepUntil)}
}

// watchAbandoned streams the feed with the SDK's WatchAbandoned, which
// follows the cluster when a node goes away and resumes after the last
// event printed; the CLI says so on stderr. It ends on SIGINT or SIGTERM
// (exit 0) or a refusal.
func (c *clientFlags) watchAbandoned(ctx context.Context, after uint64) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := c.endpoints()
	if err != nil {
		return err
	}
	creds, err := c.tls.credentials()
	if err != nil {
		return err
	}
	// A second between attempts, as an operator watching would retry.
	cl, err := client.New(client.Config{Addrs: e.Addrs, TransportCredentials: creds, DialOptions: e.DialOptions,
		MinBackoff: time.Second, MaxBackoff: time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	enc := json.NewEncoder(os.Stdout)
	err = cl.WatchAbandoned(ctx, c.tenant, after, func(up client.FeedUpdate) error {
		for _, ev := range up.Events {
			if c.output != "json" {
				printEventText(eventViewOf(ev))
			} else if err := enc.Encode(eventViewOf(ev)); err != nil {
				return runtimeError{fmt.Errorf("write output: %w", err)}
			}
		}
		return nil
	}, client.OnResume(func(addr string, err error, cursor uint64) {
		fmt.Fprintf(os.Stderr, "idemnode: %s: %v; resuming after seq %d\n", addr, status.Convert(err).Message(), cursor)
	}))
	if ctx.Err() != nil {
		return nil
	}
	return client.Describe(err, e.Addrs[0], c.timeout)
}

func printEventText(ev eventView) {
	what := ev.Kind
	if ev.Resolution != "" {
		what = fmt.Sprintf("%s %s (of %d)", ev.Kind, ev.Resolution, ev.ResolvesSeq)
	}
	point := ""
	if ev.RecoveryPoint != "" {
		point = " point=" + ev.RecoveryPoint
	}
	fmt.Printf("%d %s %s/%s/%s token=%d attempt=%d lease_expires_at=%s%s at=%s\n",
		ev.Seq, what, ev.Tenant, ev.Scope, ev.Key, ev.Token, ev.Attempt, ev.LeaseExpiresAt, point, ev.At)
}
