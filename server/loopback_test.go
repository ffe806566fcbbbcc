package server

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestLoopbackOnly: with LoopbackOnly (serve --dev), every listener given
// an address off loopback is refused, naming its flag; loopback IPs and
// localhost are accepted, localhost as 127.0.0.1; without it, any address
// passes this check.
func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	listeners := []struct {
		flag string
		set  func(*Config, string)
	}{
		{"--grpc-addr", func(c *Config, a string) { c.GRPCAddr = a }},
		{"--raft-addr", func(c *Config, a string) { c.RaftAddr = a }},
		{"--gossip-addr", func(c *Config, a string) { c.GossipAddr = a }},
		{"--http-addr", func(c *Config, a string) { c.HTTPAddr = a }},
		{"--api-addr", func(c *Config, a string) { c.APIAddr = a }},
	}
	refused := []string{"0.0.0.0:7400", "[::]:7400", ":7400", "192.168.1.20:7400", "10.0.0.1:7400",
		"[fe80::1]:7400", "example.com:7400", "my-laptop:7400", "localhost.example.com:7400", "127.0.0.1", "not an address"}
	accepted := []string{"127.0.0.1:7400", "127.0.91.11:0", "127.255.255.254:7400", "[::1]:7400", "localhost:7400", "LocalHost:7400"}
	loopback := func() Config {
		return Config{LoopbackOnly: true, GRPCAddr: "127.0.0.1:7400", RaftAddr: "127.0.0.1:7401",
			GossipAddr: "127.0.0.1:7402", HTTPAddr: "127.0.0.1:7403", APIAddr: "127.0.0.1:7404"}
	}
	for _, l := range listeners {
		for _, addr := range refused {
			c := loopback()
			l.set(&c, addr)
			err := c.checkLoopback()
			if err == nil || !strings.Contains(err.Error(), l.flag+` "`+addr+`"`) {
				t.Errorf("%s %q: err = %v, want a refusal naming %s", l.flag, addr, err, l.flag)
			}
			c.LoopbackOnly = false
			if err := c.checkLoopback(); err != nil {
				t.Errorf("%s %q without LoopbackOnly: %v", l.flag, addr, err)
			}
		}
		for _, addr := range accepted {
			c := loopback()
			l.set(&c, addr)
			if err := c.checkLoopback(); err != nil {
				t.Errorf("%s %q: %v, want it accepted", l.flag, addr, err)
			}
			// localhost is pinned to 127.0.0.1, never resolved (a hosts
			// file may map it off loopback); IPs stay as given.
			want := addr
			if strings.HasPrefix(strings.ToLower(addr), "localhost:") {
				want = "127.0.0.1:7400"
			}
			if got := c.listenAddr(l.flag); got != want {
				t.Errorf("%s %q: listens on %q, want %q", l.flag, addr, got, want)
			}
		}
	}
	// Empty turns gossip, HTTP and the JSON API off; an empty gRPC address
	// would listen on every interface.
	c := loopback()
	c.GossipAddr, c.HTTPAddr, c.APIAddr = "", "", ""
	if err := c.checkLoopback(); err != nil {
		t.Errorf("listeners off: %v", err)
	}
	c.GRPCAddr = ""
	if err := c.checkLoopback(); err == nil || !strings.Contains(err.Error(), "--grpc-addr") {
		t.Errorf("empty --grpc-addr: err = %v, want a refusal", err)
	}
}

// TestStartRefusesNonLoopbackDev: Start refuses a LoopbackOnly config off
// loopback as a *ConfigError (serve exits 2), before it listens.
func TestStartRefusesNonLoopbackDev(t *testing.T) {
	t.Parallel()
	_, err := Start(context.Background(), Config{NodeID: "n", DataDir: t.TempDir(), LoopbackOnly: true,
		GRPCAddr: "0.0.0.0:0", RaftAddr: "127.0.0.1:0", TLS: TLS{Insecure: true}})
	var invalid *ConfigError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), `--grpc-addr "0.0.0.0:0"`) {
		t.Fatalf("err = %v, want a *ConfigError naming --grpc-addr", err)
	}
}

// listenAddr is the address c holds for flag.
func (c *Config) listenAddr(flag string) string {
	return map[string]string{"--grpc-addr": c.GRPCAddr, "--raft-addr": c.RaftAddr, "--gossip-addr": c.GossipAddr,
		"--http-addr": c.HTTPAddr, "--api-addr": c.APIAddr}[flag]
}
