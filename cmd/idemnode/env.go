package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/idemnode/idemnode/internal/tlsconfig"
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
			return
		}
		_ = fs.SetAnnotation(f.Name, envAnnotation, []string{envName(f.Name)}) // the flag exists: no error
	})
	return err
}

// envAnnotation marks a flag that applyEnv set; its value is the
// variable's name, for messages about a value the user did not type.
const envAnnotation = "idemnode/env"

// fromEnv returns the variable a flag's value came from, if applyEnv set it.
func fromEnv(fs *pflag.FlagSet, flag string) (string, bool) {
	f := fs.Lookup(flag)
	if f == nil || len(f.Annotations[envAnnotation]) == 0 {
		return "", false
	}
	return f.Annotations[envAnnotation][0], true
}

// clientEnvHint says where serve's certificate came from when a client's
// certificate was refused as the node's and the environment named it. A
// shell that sourced a client's env file (scripts/cluster.sh writes one)
// holds IDEMNODE_TLS_CERT and _KEY for the client subcommands, and serve
// reads the same names for its own --tls-cert and --tls-key.
func clientEnvHint(fs *pflag.FlagSet, err error) error {
	if !errors.Is(err, tlsconfig.ErrNoServerAuth) {
		return err
	}
	var vars []string
	for _, flag := range []string{"tls-cert", "tls-key", "peer-cert", "peer-key"} {
		if v, ok := fromEnv(fs, flag); ok {
			vars = append(vars, v)
		}
	}
	if len(vars) == 0 {
		return err
	}
	return fmt.Errorf("%w; the certificate came from the environment (%s), as a client's env file sets it "+
		"(scripts/cluster.sh's env): run serve in a shell that did not source it, or unset %s",
		err, strings.Join(vars, ", "), strings.Join(vars, " "))
}
