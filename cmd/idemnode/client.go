package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

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
	// once marks a call that must not be sent to a second node after the
	// first one received it (it is not idempotent: transfer-leadership).
	once  bool
	auth  clientAuth
	tls   clientTLS
	flags *pflag.FlagSet
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

func (c *clientFlags) id() *idempb.RecordId {
	return &idempb.RecordId{Tenant: c.tenant, Scope: c.scope, Key: c.key}
}

func (c *clientFlags) consistency() idempb.Consistency {
	if c.consistencyName == "stale" {
		return idempb.Consistency_CONSISTENCY_STALE
	}
	return idempb.Consistency_CONSISTENCY_LINEARIZABLE
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
	return &client.Endpoints{Addrs: addrs, TLS: tlsCfg, DialOptions: dial, Timeout: c.timeout, Once: c.once}, nil
}

// call runs fn against the endpoints of --addr in order, within --timeout
// in all (client.Endpoints): a gRPC failure comes back as a
// *client.Failure, what fn returned otherwise as it is.
func (c *clientFlags) call(ctx context.Context, fn func(context.Context, *grpc.ClientConn) error) error {
	e, err := c.endpoints()
	if err != nil {
		return err
	}
	return e.Call(ctx, fn)
}

// outcomer is an answer that is only an outcome.
type outcomer interface{ GetOutcome() idempb.Outcome }

// callForOutcome runs a call whose answer is an outcome, and prints it.
func (c *clientFlags) callForOutcome(ctx context.Context, call func(context.Context, idempb.IdempotencyClient) (outcomer, error)) error {
	return c.call(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		out, err := call(ctx, idempb.NewIdempotencyClient(conn))
		if err != nil {
			return err
		}
		return c.print(outcomeView{Outcome: outcomeName(out.GetOutcome())}, out.GetOutcome())
	})
}

func addClientCommands(root *cobra.Command) {
	root.AddCommand(newClaimCmd(), newCompleteCmd(), newReleaseCmd(), newExtendCmd(), newCheckpointCmd(), newAbandonedCmd(),
		newGetCmd(), newWaitCmd(), newStatusCmd(), newMembersCmd(), newRemoveMemberCmd(), newTransferLeadershipCmd(), newSnapshotCmd())
	withExitCodes(root)
}

func newClaimCmd() *cobra.Command {
	var c clientFlags
	var fingerprint, requestFile, owner string
	var noFingerprint bool
	var lease, ttl, wait time.Duration
	cmd := &cobra.Command{
		Use:   "claim",
		Short: "Claim a key before running a side effect; prints the token when it wins",
		Example: `  idemnode claim --tenant acme --scope 'POST /v1/charges' --key order-42 --request-file request.json
  # exit 0: won, run the side effect, then complete with the token; 4: completed, the
  # stored response is printed; 3: in progress elsewhere (or add --wait 10s); 5: retry
  # with the same --owner`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			fp, err := readFingerprint(fingerprint, requestFile, noFingerprint)
			if err != nil {
				return err
			}
			generated := owner == ""
			if generated {
				owner = newOwner()
			}
			if wait > 0 {
				c.waitTimeout(wait, defaultTimeout)
				wait = max(time.Millisecond, c.waitWithin(wait))
			}
			req := &idempb.ClaimRequest{Id: c.id(), Fingerprint: fp, Owner: owner,
				Lease: optDuration(lease), Ttl: optDuration(ttl), Wait: optDuration(wait)}
			var outcome idempb.Outcome
			err = c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := idempb.NewIdempotencyClient(conn).Claim(ctx, req)
				if err != nil {
					return err
				}
				outcome = resp.GetOutcome()
				return c.print(claimView(resp, owner), outcome)
			})
			if generated && ownerNeeded(outcome, err) {
				fmt.Fprintf(os.Stderr, "idemnode: claim owner %s (generated: pass --owner %s to retry this same claim)\n", owner, owner)
			}
			return err
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&fingerprint, "fingerprint", "", "request fingerprint in hex")
	fl.StringVar(&requestFile, "request-file", "", "file whose SHA-256 is the fingerprint")
	fl.BoolVar(&noFingerprint, "no-fingerprint", false,
		"claim without a fingerprint: a different request under the same key is then answered from the record, not refused as mismatch")
	fl.StringVar(&owner, "owner", "", "claim nonce, reused on retries of this claim (default: random)")
	fl.DurationVar(&lease, "lease", 0, "lease (default 30s)")
	fl.DurationVar(&ttl, "ttl", 0, "time to keep the record (default 24h)")
	fl.DurationVar(&wait, "wait", 0, "wait this long for an in-flight holder to finish (--timeout then defaults to the wait plus 5s, at least 10s)")
	return cmd
}

// ownerNeeded says whether a claim's generated owner is worth printing:
// only a retry of this same claim needs it, after it won (the holder
// resumes it elsewhere) or when its answer is unknown (exit 5, or any
// failure). A replay (completed) or a refusal answered by the record needs
// no owner.
func ownerNeeded(o idempb.Outcome, err error) bool {
	var answered exitError
	var failed *client.Failure
	switch {
	case o == idempb.Outcome_OUTCOME_WON, err == nil:
		return o == idempb.Outcome_OUTCOME_WON
	case errors.As(err, &answered):
		return false
	case errors.As(err, &failed):
		return failed.Kind == client.KindRetry
	}
	return true // a local failure: the answer may have been lost
}

// readFingerprint is the claim's fingerprint: the hex of --fingerprint, or
// the SHA-256 of --request-file. A claim with neither is refused unless
// --no-fingerprint says so: without one, a different request under the
// same key is answered from the record instead of refused as mismatch.
func readFingerprint(hexFP, file string, none bool) ([]byte, error) {
	switch {
	case hexFP != "" && file != "":
		return nil, fmt.Errorf("--fingerprint and --request-file are exclusive")
	case none && (hexFP != "" || file != ""):
		return nil, fmt.Errorf("--no-fingerprint excludes --fingerprint and --request-file")
	case !none && hexFP == "" && file == "":
		return nil, fmt.Errorf("claim needs --fingerprint or --request-file, so that a different request under the same key " +
			"is refused (mismatch) rather than answered from the record; --no-fingerprint claims without one")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--request-file: %w", err)
		}
		sum := sha256.Sum256(b)
		return sum[:], nil
	case hexFP != "":
		b, err := hex.DecodeString(hexFP)
		if err != nil {
			return nil, fmt.Errorf("--fingerprint is not hex: %w", err)
		}
		return b, nil
	}
	return nil, nil
}

func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func optDuration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func newCompleteCmd() *cobra.Command {
	var c clientFlags
	var token uint64
	var statusCode int32
	var headers []string
	var bodyFile string
	cmd := &cobra.Command{
		Use:   "complete",
		Short: "Store the response of a claimed key",
		Example: `  idemnode complete --tenant acme --scope 'POST /v1/charges' --key order-42 --token 327680 \
    --status 201 --header 'Content-Type: application/json' --body-file response.json
  # exit 0: stored (or already stored by this token); 1: fenced (the lease was lost) or not_found`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			resp, err := buildResponse(statusCode, headers, bodyFile)
			if err != nil {
				return err
			}
			req := &idempb.CompleteRequest{Id: c.id(), Token: token, Response: resp}
			return c.callForOutcome(cmd.Context(), func(ctx context.Context, api idempb.IdempotencyClient) (outcomer, error) {
				return api.Complete(ctx, req)
			})
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.Uint64Var(&token, "token", 0, "fencing token returned by claim (required)")
	fl.Int32Var(&statusCode, "status", 200, "response status code")
	fl.StringArrayVar(&headers, "header", nil, "response header 'Name: value' (repeatable, ordered)")
	fl.StringVar(&bodyFile, "body-file", "", "file holding the response body ('-' for stdin)")
	return cmd
}

func buildResponse(code int32, headers []string, bodyFile string) (*idempb.Response, error) {
	r := &idempb.Response{Status: code}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--header %q: want 'Name: value'", h)
		}
		r.Headers = append(r.Headers, &idempb.Header{Name: strings.TrimSpace(name), Value: strings.TrimLeft(value, " ")})
	}
	body, err := readInput("--body-file", bodyFile)
	if err != nil {
		return nil, err
	}
	r.Body = body
	return r, nil
}

// readInput reads the file a flag names: nothing for "", stdin for "-".
func readInput(flag, file string) ([]byte, error) {
	switch file {
	case "":
		return nil, nil
	case "-":
		b, err := readAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("%s: read stdin: %w", flag, err)
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return b, nil
}

func newReleaseCmd() *cobra.Command {
	var c clientFlags
	var token uint64
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Release a claimed key after a transient failure, so a retry re-executes",
		Example: `  idemnode release --tenant acme --scope 'POST /v1/charges' --key order-42 --token 327680
  # exit 0: released (or already gone); 1: fenced (another claim holds it now)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			req := &idempb.ReleaseRequest{Id: c.id(), Token: token}
			return c.callForOutcome(cmd.Context(), func(ctx context.Context, api idempb.IdempotencyClient) (outcomer, error) {
				return api.Release(ctx, req)
			})
		},
	}
	c.register(cmd, true)
	cmd.Flags().Uint64Var(&token, "token", 0, "fencing token returned by claim (required)")
	return cmd
}

func newExtendCmd() *cobra.Command {
	var c clientFlags
	var token uint64
	var lease time.Duration
	cmd := &cobra.Command{
		Use:   "extend",
		Short: "Extend the lease of a claimed key",
		Example: `  idemnode extend --tenant acme --scope 'POST /v1/charges' --key order-42 --token 327680 --lease 2m
  # exit 0: extended; 1: fenced (the lease was lost: stop) or not_found`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			req := &idempb.ExtendRequest{Id: c.id(), Token: token, Lease: optDuration(lease)}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewIdempotencyClient(conn).Extend(ctx, req)
				if err != nil {
					return err
				}
				v := outcomeView{Outcome: outcomeName(out.GetOutcome()), LeaseExpiresAt: tsString(out.GetLeaseExpiresAt())}
				return c.print(v, out.GetOutcome())
			})
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.Uint64Var(&token, "token", 0, "fencing token returned by claim (required)")
	fl.DurationVar(&lease, "lease", 0, "new lease from now (default 30s)")
	return cmd
}

func newCheckpointCmd() *cobra.Command {
	var c clientFlags
	var token uint64
	var point, dataFile string
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Record a finished step of a claimed key's operation, where a takeover resumes",
		Example: `  idemnode checkpoint --tenant acme --scope 'POST /v1/rides' --key ride-42 --token 327680 \
    --point charged --data-file charge.json
  # exit 0: recorded (or already, with the same data); 1: fenced (the lease was lost: stop),
  # mismatch (this point was recorded with other data) or not_found. A claim that takes the
  # key over prints the last point as recovery_point (-o json).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			if point == "" {
				return fmt.Errorf("--point is required")
			}
			data, err := readInput("--data-file", dataFile)
			if err != nil {
				return err
			}
			req := &idempb.CheckpointRequest{Id: c.id(), Token: token, Point: point, Data: data}
			return c.callForOutcome(cmd.Context(), func(ctx context.Context, api idempb.IdempotencyClient) (outcomer, error) {
				return api.Checkpoint(ctx, req)
			})
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.Uint64Var(&token, "token", 0, "fencing token returned by claim (required)")
	fl.StringVar(&point, "point", "", "name of the step that is done (required)")
	fl.StringVar(&dataFile, "data-file", "", "file holding what resuming after the step needs, up to 64 KiB ('-' for stdin)")
	return cmd
}

func newGetCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show the record of a key",
		Example: `  idemnode get --tenant acme --scope 'POST /v1/charges' --key order-42 -o json
  # exit 0: the record is printed (a pending one whose lease lapsed says so); 1: not_found`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			req := &idempb.GetRequest{Id: c.id(), Consistency: c.consistency()}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewIdempotencyClient(conn).Get(ctx, req)
				if err != nil {
					return err
				}
				return c.print(recordResult(out.GetOutcome(), out.GetRecord(), time.Now()), out.GetOutcome())
			})
		},
	}
	c.register(cmd, true)
	c.registerConsistency(cmd)
	return cmd
}

func newWaitCmd() *cobra.Command {
	var c clientFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Wait until a key leaves PENDING, then show it",
		Example: `  idemnode wait --tenant acme --scope 'POST /v1/charges' --key order-42 --wait 20s --timeout 25s
  # exit 4: completed, the stored response is printed; 3: still pending when the wait
  # ended; 1: gone (released or expired): claim again`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			if wait <= 0 {
				return fmt.Errorf("--wait must be positive")
			}
			c.waitTimeout(wait, 0)
			wait = max(time.Millisecond, c.waitWithin(wait))
			req := &idempb.WaitRequest{Id: c.id(), Timeout: durationpb.New(wait), Consistency: c.consistency()}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewIdempotencyClient(conn).Wait(ctx, req)
				if err != nil {
					return err
				}
				return c.print(recordResult(out.GetOutcome(), out.GetRecord(), time.Now()), out.GetOutcome())
			})
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.DurationVar(&wait, "wait", 30*time.Second, "how long to wait (--timeout defaults to this plus 5s; a shorter --timeout cuts it)")
	c.registerConsistency(cmd)
	return cmd
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
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewAdminClient(conn).Status(ctx, &idempb.StatusRequest{})
				if err != nil {
					return err
				}
				return c.print(statusViewOf(out), idempb.Outcome_OUTCOME_OK)
			})
		},
	}
	c.register(cmd, false)
	return cmd
}
