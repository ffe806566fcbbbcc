package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// The subcommands on records: each is one call of the SDK (a OneShot
// client: sdk), its answer printed with the exit code of its outcome.

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
			var outcome client.Outcome
			err = c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				res, err := cl.Claim(ctx, c.id(), fp, client.WithOwner(owner), client.WithLease(lease), client.WithTTL(ttl), client.WithWait(wait))
				if err != nil {
					return err
				}
				outcome = res.Outcome
				return c.print(claimView(res), idempb.Outcome(outcome))
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
// failure here). A replay (completed) or a refusal answered by the record
// needs no owner.
func ownerNeeded(o client.Outcome, err error) bool {
	var answered exitError
	var failed *client.Failure
	switch {
	case o == client.OutcomeWon, err == nil:
		return o == client.OutcomeWon
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

// newOwner is a claim's nonce: printed when a retry may need it, so it
// is made here rather than by the SDK.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// outcomeCmd runs a call of the SDK whose answer is an outcome, and
// prints it.
func (c *clientFlags) outcomeCmd(ctx context.Context, call func(context.Context, *client.Client) (client.Outcome, error)) error {
	return c.sdk(ctx, func(ctx context.Context, cl *client.Client) error {
		o, err := call(ctx, cl)
		if err != nil {
			return err
		}
		return c.print(outcomeView{Outcome: o.String()}, idempb.Outcome(o))
	})
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
			return c.outcomeCmd(cmd.Context(), func(ctx context.Context, cl *client.Client) (client.Outcome, error) {
				return cl.Complete(ctx, c.id(), token, resp)
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

func buildResponse(code int32, headers []string, bodyFile string) (client.Response, error) {
	r := client.Response{Status: int(code)}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return r, fmt.Errorf("--header %q: want 'Name: value'", h)
		}
		r.Headers = append(r.Headers, client.Header{Name: strings.TrimSpace(name), Value: strings.TrimLeft(value, " ")})
	}
	body, err := readInput("--body-file", bodyFile)
	if err != nil {
		return r, err
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
			return c.outcomeCmd(cmd.Context(), func(ctx context.Context, cl *client.Client) (client.Outcome, error) {
				return cl.Release(ctx, c.id(), token)
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
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				out, err := cl.Extend(ctx, c.id(), token, lease)
				if err != nil {
					return err
				}
				v := outcomeView{Outcome: out.Outcome.String(), LeaseExpiresAt: timeString(out.LeaseExpiresAt)}
				return c.print(v, idempb.Outcome(out.Outcome))
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
			return c.outcomeCmd(cmd.Context(), func(ctx context.Context, cl *client.Client) (client.Outcome, error) {
				return cl.Checkpoint(ctx, c.id(), token, point, data)
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
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				r, err := cl.Get(ctx, c.id(), c.readOptions()...)
				o := client.OutcomeOK
				switch {
				case errors.Is(err, client.ErrNotFound):
					o, err = client.OutcomeNotFound, nil
				case err != nil:
					return err
				case r.State == client.StateExpired:
					o = client.OutcomeExpired // the server answers a tombstone so
				}
				return c.print(recordResult(o, r, time.Now()), idempb.Outcome(o))
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
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				out, err := cl.Wait(ctx, c.id(), wait, c.readOptions()...)
				if err != nil {
					return err
				}
				return c.print(recordResult(out.Outcome, out.Record, time.Now()), idempb.Outcome(out.Outcome))
			})
		},
	}
	c.register(cmd, true)
	fl := cmd.Flags()
	fl.DurationVar(&wait, "wait", 30*time.Second, "how long to wait (--timeout defaults to this plus 5s; a shorter --timeout cuts it)")
	c.registerConsistency(cmd)
	return cmd
}
