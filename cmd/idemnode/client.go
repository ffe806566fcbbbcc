package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// clientFlags are shared by every client subcommand.
type clientFlags struct {
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
}

func (c *clientFlags) register(cmd *cobra.Command, withKey bool) {
	fl := cmd.Flags()
	fl.StringVar(&c.addr, "addr", "127.0.0.1:7400", "gRPC address of any idemnode server")
	fl.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
	fl.DurationVar(&c.timeout, "timeout", 10*time.Second, "deadline of the call")
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
	return nil
}

// call dials the server and runs fn within the timeout; a failure to reach
// the server or a server-side failure is a runtime error, an InvalidArgument
// answer is a usage error (the input was bad).
func (c *clientFlags) call(ctx context.Context, fn func(context.Context, *grpc.ClientConn) error) error {
	conn, err := c.dial(c.addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", c.addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err = fn(ctx, conn)
	if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
		return fmt.Errorf("invalid input: %s", st.Message())
	}
	if err != nil {
		return runtimeError{err}
	}
	return nil
}

// dial connects to addr with the credentials of the flags.
func (c *clientFlags) dial(addr string) (*grpc.ClientConn, error) {
	creds, err := c.tls.credentials()
	if err != nil {
		return nil, err
	}
	return c.dialWith(addr, creds)
}

// dialWith connects to addr over creds, sending the token flags' bearer
// token on every call.
func (c *clientFlags) dialWith(addr string, creds credentials.TransportCredentials) (*grpc.ClientConn, error) {
	opts, err := c.auth.dialOptions()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(creds))...)
}

func addClientCommands(root *cobra.Command) {
	root.AddCommand(newClaimCmd(), newCompleteCmd(), newReleaseCmd(), newExtendCmd(),
		newGetCmd(), newWaitCmd(), newStatusCmd(), newMembersCmd(), newRemoveMemberCmd(), newTransferLeadershipCmd(), newSnapshotCmd())
}

func newClaimCmd() *cobra.Command {
	var c clientFlags
	var fingerprint, requestFile, owner string
	var lease, ttl, wait time.Duration
	cmd := &cobra.Command{
		Use:   "claim",
		Short: "Claim a key before running a side effect; prints the token when it wins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			fp, err := readFingerprint(fingerprint, requestFile)
			if err != nil {
				return err
			}
			if owner == "" {
				owner = newOwner()
			}
			// As for wait: the call's own deadline leaves room for the
			// server's answer at the end of the wait.
			if wait > 0 {
				c.timeout = max(c.timeout, wait+5*time.Second)
			}
			req := &idempb.ClaimRequest{Id: c.id(), Fingerprint: fp, Owner: owner,
				Lease: optDuration(lease), Ttl: optDuration(ttl), Wait: optDuration(wait)}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := idempb.NewIdempotencyClient(conn).Claim(ctx, req)
				if err != nil {
					return err
				}
				return c.print(claimView(resp, owner), resp.GetOutcome())
			})
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&fingerprint, "fingerprint", "", "request fingerprint in hex")
	fl.StringVar(&requestFile, "request-file", "", "file whose SHA-256 is the fingerprint")
	fl.StringVar(&owner, "owner", "", "claim nonce, reused on retries of this claim (default: random)")
	fl.DurationVar(&lease, "lease", 0, "lease (default 30s)")
	fl.DurationVar(&ttl, "ttl", 0, "time to keep the record (default 24h)")
	fl.DurationVar(&wait, "wait", 0, "wait this long for an in-flight holder to finish")
	return cmd
}

func readFingerprint(hexFP, file string) ([]byte, error) {
	switch {
	case hexFP != "" && file != "":
		return nil, fmt.Errorf("--fingerprint and --request-file are exclusive")
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
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			resp, err := buildResponse(statusCode, headers, bodyFile)
			if err != nil {
				return err
			}
			req := &idempb.CompleteRequest{Id: c.id(), Token: token, Response: resp}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewIdempotencyClient(conn).Complete(ctx, req)
				if err != nil {
					return err
				}
				return c.print(outcomeView{Outcome: outcomeName(out.GetOutcome())}, out.GetOutcome())
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
	switch bodyFile {
	case "":
	case "-":
		b, err := readAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("read body from stdin: %w", err)
		}
		r.Body = b
	default:
		b, err := os.ReadFile(bodyFile)
		if err != nil {
			return nil, fmt.Errorf("--body-file: %w", err)
		}
		r.Body = b
	}
	return r, nil
}

func newReleaseCmd() *cobra.Command {
	var c clientFlags
	var token uint64
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Release a claimed key after a transient failure, so a retry re-executes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			req := &idempb.ReleaseRequest{Id: c.id(), Token: token}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewIdempotencyClient(conn).Release(ctx, req)
				if err != nil {
					return err
				}
				return c.print(outcomeView{Outcome: outcomeName(out.GetOutcome())}, out.GetOutcome())
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
		Args:  cobra.NoArgs,
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

func newGetCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show the record of a key",
		Args:  cobra.NoArgs,
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
				return c.print(recordResult(out.GetOutcome(), out.GetRecord()), out.GetOutcome())
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
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(true); err != nil {
				return err
			}
			if wait <= 0 {
				return fmt.Errorf("--wait must be positive")
			}
			// The call's own deadline leaves room for the server's answer.
			c.timeout = max(c.timeout, wait+5*time.Second)
			req := &idempb.WaitRequest{Id: c.id(), Timeout: durationpb.New(wait), Consistency: c.consistency()}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewIdempotencyClient(conn).Wait(ctx, req)
				if err != nil {
					return err
				}
				return c.print(recordResult(out.GetOutcome(), out.GetRecord()), out.GetOutcome())
			})
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.DurationVar(&wait, "wait", 30*time.Second, "how long to wait")
	c.registerConsistency(cmd)
	return cmd
}

func newStatusCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a node's view of the cluster",
		Args:  cobra.NoArgs,
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
