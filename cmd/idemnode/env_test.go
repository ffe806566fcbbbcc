package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestApplyEnv(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	addr := fs.String("grpc-addr", "127.0.0.1:7400", "")
	expect := fs.Int("bootstrap-expect", 0, "")
	join := fs.StringSlice("join", []string{"default:1"}, "")
	wait := fs.Duration("expiry-interval", time.Second, "")
	if err := fs.Parse([]string{"--bootstrap-expect", "5"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"IDEMNODE_GRPC_ADDR":        "10.0.0.1:7400",
		"IDEMNODE_BOOTSTRAP_EXPECT": "3", // the command line wins
		"IDEMNODE_JOIN":             "a:7402,b:7402",
		"IDEMNODE_EXPIRY_INTERVAL":  "250ms",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := applyEnv(fs, lookup); err != nil {
		t.Fatal(err)
	}
	if *addr != "10.0.0.1:7400" || *expect != 5 || strings.Join(*join, ",") != "a:7402,b:7402" || *wait != 250*time.Millisecond {
		t.Fatalf("got addr=%s expect=%d join=%v wait=%s", *addr, *expect, *join, *wait)
	}
	env = map[string]string{"IDEMNODE_EXPIRY_INTERVAL": "soon"}
	fs2 := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs2.Duration("expiry-interval", time.Second, "")
	err := applyEnv(fs2, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil || !strings.Contains(err.Error(), "IDEMNODE_EXPIRY_INTERVAL") {
		t.Fatalf("bad value: %v, want an error naming the variable", err)
	}
}
