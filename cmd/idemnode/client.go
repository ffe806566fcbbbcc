package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// clientFlags are shared by every client subcommand.
type clientFlags struct {
	// addr is one gRPC address or several, comma-separated, tried in order.
	addr    string
	tenant  string
	scope   string
	key     string
	output  string
	timeout time.Duration
	// consistency of reads: linearizable or stale.
	consistencyName string
	auth            clientAuth
	tls             clientTLS
	flags           *pflag.FlagSet
}

// defaultTimeout bounds a call whose --timeout is not given (and that does
// not wait: see waitTimeout).
const defaultTimeout = 10 * time.Second

func (c *clientFlags) register(cmd *cobra.Command, withKey bool) {
	fl := cmd.Flags()
	c.flags = fl
	fl.StringVar(&c.addr, "addr", "127.0.0.1:7400",
		"gRPC addresses of idemnode servers, comma-separated, tried in order until one answers")
	fl.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
	fl.DurationVar(&c.timeout, "timeout", defaultTimeout, "deadline of the whole call, every --addr tried included")
	c.auth.register(fl)
	c.tls.register(fl)
	if withKey {
		fl.StringVar(&c.tenant, "tenant", "", "tenant that owns the key")
		fl.StringVar(&c.scope, "scope", "", "operation family, e.g. 'POST /v1/charges'")
		fl.StringVar(&c.key, "key", "", "the Idempotency-Key (required)")
	}
}

func (c *clientFlags) id() client.ID {
	return client.ID{Tenant: c.tenant, Scope: c.scope, Key: c.key}
}

// readOptions are the SDK's read options of --consistency.
func (c *clientFlags) readOptions() []client.ReadOption {
	if c.consistencyName == "stale" {
		return []client.ReadOption{client.Stale()}
	}
	return nil
}

func (c *clientFlags) registerConsistency(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.consistencyName, "consistency", "linearizable",
		"linearizable (confirmed by the leader) or stale (this node's local state)")
}

func (c *clientFlags) check(needKey bool) error {
	if c.output != "text" && c.output != "json" {
		return fmt.Errorf("-o must be text or json, got %q", c.output)
	}
	if needKey && c.key == "" {
		return fmt.Errorf("--key is required")
	}
	if c.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	if c.consistencyName != "" && c.consistencyName != "linearizable" && c.consistencyName != "stale" {
		return fmt.Errorf("--consistency must be linearizable or stale, got %q", c.consistencyName)
	}
	_, err := c.addrs()
	return err
}

// addrs splits --addr into its endpoints.
func (c *clientFlags) addrs() ([]string, error) {
	var out []string
	for _, a := range strings.Split(c.addr, ",") {
		a = strings.TrimSpace(a)
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("--addr %q: want host:port[,host:port...]: %w", c.addr, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// waitTimeout sets the deadline of a call that waits up to wait on the
// server: without --timeout, the wait plus 5 s for the answer (and never
// less than the default); with it, --timeout as given.
func (c *clientFlags) waitTimeout(wait, atLeast time.Duration) {
	if !c.flags.Changed("timeout") {
		c.timeout = max(atLeast, wait+5*time.Second)
	}
}

// waitWithin is the longest server-side wait whose answer still arrives
// within --timeout: a wait longer than that is cut, so the call ends in
// time with the record as it then is, not with a timeout.
func (c *clientFlags) waitWithin(wait time.Duration) time.Duration {
	room := c.timeout - client.ExplainReserve(c.timeout)
	return max(0, min(wait, room-min(time.Second, room/4)))
}

// endpoints are the nodes of --addr with the flags' credentials.
func (c *clientFlags) endpoints() (*client.Endpoints, error) {
	addrs, err := c.addrs()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := c.tls.config()
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", addrs[0], err)
	}
	dial, err := c.auth.dialOptions()
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", addrs[0], err)
	}
	return &client.Endpoints{Addrs: addrs, TLS: tlsCfg, DialOptions: dial, Timeout: c.timeout}, nil
}

// sdk runs fn with a OneShot client of --addr (client.Config.OneShot: the
// nodes in order, each once, within --timeout): a failed call's error is
// its *client.Failure, whatever fn returned otherwise (an answer's
// exitError, a local failure) is returned as it is.
func (c *clientFlags) sdk(ctx context.Context, fn func(context.Context, *client.Client) error) error {
	e, err := c.endpoints()
	if err != nil {
		return err
	}
	cl, err := client.New(client.Config{Addrs: e.Addrs, TLS: e.TLS, DialOptions: e.DialOptions, Timeout: c.timeout, OneShot: true})
	if err != nil {
		return err
	}
	defer cl.Close()
	return client.Describe(fn(ctx, cl), e.Addrs[0], c.timeout)
}

func addClientCommands(root *cobra.Command) {
	root.AddCommand(newClaimCmd(), newCompleteCmd(), newReleaseCmd(), newExtendCmd(), newCheckpointCmd(), newAbandonedCmd(),
		newGetCmd(), newWaitCmd(), newStatusCmd(), newMembersCmd(), newRemoveMemberCmd(), newTransferLeadershipCmd(), newSnapshotCmd())
	withExitCodes(root)
}

func newStatusCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a node's view of the cluster",
		Example: `  idemnode status --addr 127.0.0.11:7400,127.0.0.12:7400,127.0.0.13:7400
  # every field, zeros included; fields a non-admin caller may not see say "redacted"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				st, err := cl.Status(ctx)
				if err != nil {
					return err
				}
				return c.print(statusViewOf(st), idempb.Outcome_OUTCOME_OK)
			})
		},
	}
	c.register(cmd, false)
	return cmd
}
