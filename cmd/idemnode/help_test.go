package main

import (
	"strings"
	"testing"
)

// TestHelpShowsExamplesAndExitCodes: every client subcommand's --help has an
// example and the exit-code table; serve's lists its environment variables.
func TestHelpShowsExamplesAndExitCodes(t *testing.T) {
	t.Parallel()
	client := [][]string{{"claim"}, {"complete"}, {"release"}, {"extend"}, {"get"}, {"wait"}, {"status"},
		{"members"}, {"remove-member"}, {"transfer-leadership"}, {"snapshot", "save"}}
	for _, sub := range client {
		stdout, _, code := cli(t, append(sub, "--help")...)
		for _, want := range []string{"Examples:\n  idemnode " + strings.Join(sub, " "), exitCodesHelp, "IDEMNODE_ADDR"} {
			if code != exitOK || !strings.Contains(stdout, want) {
				t.Errorf("idemnode %s --help (exit %d) has no %q:\n%s", strings.Join(sub, " "), code, want, stdout)
			}
		}
	}
	for _, sub := range [][]string{{"serve"}, {"version"}, {"snapshot", "restore"}} {
		if stdout, _, _ := cli(t, append(sub, "--help")...); !strings.Contains(stdout, "Examples:\n  idemnode "+sub[0]) {
			t.Errorf("idemnode %s --help has no example:\n%s", strings.Join(sub, " "), stdout)
		}
	}

	serve, _, _ := cli(t, "serve", "--help")
	fl := newServeCmd().Flags()
	for _, name := range []string{"grpc-addr", "data-dir", "bootstrap-expect", "auth-tokens-file", "tls-cert", "gossip-key-file"} {
		if fl.Lookup(name) == nil {
			t.Fatalf("serve has no --%s", name)
		}
		if !strings.Contains(serve, envName(name)+" ") {
			t.Errorf("serve --help does not list %s", envName(name))
		}
	}
	if strings.Contains(serve, "IDEMNODE_FAULT_") {
		t.Errorf("serve --help lists the hidden fault-injection flags:\n%s", serve)
	}
	if !strings.Contains(serve, "3 a Raft log write failed") {
		t.Errorf("serve --help does not give its own exit codes:\n%s", serve)
	}
}
