// Command idemnode runs an idemnode server (serve) and talks to one as a
// client (claim, complete, release, extend, get, wait, status).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes: a refused operation (its JSON still printed) or a failure at
// run time is 1; bad flags or input are 2.
const (
	exitFailed = 1
	exitUsage  = 2
)

// runtimeError marks a failure that is not the caller's input: the server
// could not be reached, the node failed to start.
type runtimeError struct{ err error }

func (e runtimeError) Error() string { return e.err.Error() }
func (e runtimeError) Unwrap() error { return e.err }

// refusedError is returned after printing an answer such as MISMATCH or
// FENCED, so main exits 1 without printing anything more.
type refusedError struct{ outcome string }

func (e refusedError) Error() string { return "refused: " + e.outcome }

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the exit code. Anything that is
// neither a refusal nor a runtime failure is a usage error: cobra's own
// parse errors, bad flag values, or input the server refused as invalid.
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	var refused refusedError
	var runtime runtimeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &refused):
		return exitFailed
	case errors.As(err, &runtime):
		fmt.Fprintln(os.Stderr, "idemnode:", err)
		return exitFailed
	default:
		fmt.Fprintln(os.Stderr, "idemnode:", err)
		return exitUsage
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "idemnode",
		Short:         "A highly available idempotency-key service",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every flag can also come from IDEMNODE_<FLAG> (see env.go).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd.Flags(), os.LookupEnv)
		},
	}
	root.AddCommand(newServeCmd(), newAuthCmd())
	addClientCommands(root)
	return root
}
