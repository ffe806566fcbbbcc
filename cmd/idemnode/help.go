package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// withExitCodes puts the exit-code table into the --help of every client
// subcommand under cmd (those with --addr).
func withExitCodes(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		withExitCodes(sub)
	}
	if cmd.Flags().Lookup("addr") == nil {
		return
	}
	long := cmd.Long
	if long == "" {
		long = cmd.Short + "."
	}
	cmd.Long = long + "\n\n" + exitCodesHelp + "\n\n" +
		"--addr (IDEMNODE_ADDR) takes several nodes, comma-separated: they are tried in order\n" +
		"until one answers, all within --timeout."
}

// envHelp lists the environment variables that set cmd's flags, for its
// --help: every flag, hidden ones aside.
func envHelp(fl *pflag.FlagSet) string {
	var b strings.Builder
	b.WriteString("Environment: every flag can also be set as IDEMNODE_<FLAG>; a flag given on the\ncommand line wins.")
	fl.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "help" {
			fmt.Fprintf(&b, "\n  %-32s --%s", envName(f.Name), f.Name)
		}
	})
	return b.String()
}
