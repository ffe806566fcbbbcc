package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// envPrefix names the environment variables that set flags: --grpc-addr is
// IDEMNODE_GRPC_ADDR. A flag given on the command line wins.
const envPrefix = "IDEMNODE_"

// envName returns the environment variable for a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment variable, if that is set. A bad value is a usage error that
// names the variable.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		v, ok := lookup(envName(f.Name))
		if !ok {
			return
		}
		if f.Value.Type() == "stringSlice" || f.Value.Type() == "stringArray" {
			// Set appends to slices; the variable replaces the default.
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				if serr := sv.Replace(strings.Split(v, ",")); serr != nil {
					err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, serr)
				}
				return
			}
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, serr)
		}
	})
	return err
}
