// Command idemnode runs an idemnode server (serve) and talks to one as a
// client (claim, complete, release, extend, get, wait, status).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/idemnode/idemnode/client"
)

// runtimeError marks a failure that is not the caller's input: the node
// failed to start, the output could not be written. It exits 1.
type runtimeError struct{ err error }

func (e runtimeError) Error() string { return e.err.Error() }
func (e runtimeError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the exit code (exit.go). A
// failure is said on stderr and, when the subcommand was asked for -o json,
// also as one JSON object on stdout; an answer already printed (its exit
// code in an exitError) adds nothing.
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	code := exitCodeOf(err)
	var answered exitError
	if err == nil || errors.As(err, &answered) {
		return code
	}
	fmt.Fprintln(os.Stderr, "idemnode:", err)
	if out := cmd.Flags().Lookup("output"); out != nil && out.Value.String() == "json" {
		var failed *client.Failure
		if !errors.As(err, &failed) {
			failed = client.UsageFailure(err)
			if code != exitUsage {
				failed = &client.Failure{Code: "INTERNAL", Reason: "LOCAL", Message: err.Error()}
			}
		}
		_ = failed.WriteJSON(os.Stdout)
	}
	return code
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "idemnode",
		Short:         "A highly available idempotency-key service",
		Version:       versionText(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every flag can also come from IDEMNODE_<FLAG> (see env.go).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd.Flags(), os.LookupEnv)
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newServeCmd(), newProxyCmd(), newAuthCmd(), newVersionCmd())
	root.AddCommand(newTLSCmd(), newKeygenCmd()) // certs.go
	addClientCommands(root)
	return root
}
