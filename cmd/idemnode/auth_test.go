package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc"
)

// hashLine runs `idemnode auth hash-token` on token and returns its line.
func hashLine(t *testing.T, token string, args ...string) string {
	t.Helper()
	stdout, stderr, code := cliIn(t, token+"\n", append([]string{"auth", "hash-token"}, args...)...)
	if code != 0 || stderr != "" {
		t.Fatalf("hash-token: exit %d, stderr %q", code, stderr)
	}
	return stdout
}

func TestHashToken(t *testing.T) {
	t.Parallel()
	token := "acme-token-0123456789"
	if got, want := hashLine(t, token, "--tenant", "acme", "--admin"), rpc.HashToken(token)+" acme admin\n"; got != want {
		t.Fatalf("hash-token prints %q, want %q", got, want)
	}
	if got, want := hashLine(t, token, "--tenant", "acme"), rpc.HashToken(token)+" acme\n"; got != want {
		t.Fatalf("hash-token prints %q, want %q", got, want)
	}
	for _, tc := range []struct{ name, stdin, tenant, stderr string }{
		{"short token", "short", "acme", "at least 16 bytes"},
		{"two words", "acme-token 0123456789", "acme", "one word"},
		{"no tenant", token, "", "--tenant"},
		{"tenant with a space", token, "ac me", "--tenant"},
	} {
		stdout, stderr, code := cliIn(t, tc.stdin, "auth", "hash-token", "--tenant", tc.tenant)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.name, code, stdout, stderr, tc.stderr)
		}
	}
}

func TestServeAuthFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--auth"}, "--auth needs --auth-tokens-file"},
		{[]string{"--auth-tokens-file", "tokens"}, "--auth-tokens-file needs --auth"},
		{[]string{"--auth-admin", "ops"}, "--auth-admin needs --auth"},
		{[]string{"--auth", "--auth-tokens-file", "t", "--auth-cert-tenant", "subject"}, "--auth-cert-tenant"},
		{[]string{"--tenant-claim-rate", "-1"}, "must not be negative"},
	} {
		args := append([]string{"serve", "--data-dir", dir}, tc.args...)
		if _, stderr, code := cli(t, args...); code != 2 || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.stderr)
		}
	}
}

// TestServeWithAuth runs `idemnode serve --auth` with a tokens file made by
// hash-token: the CLI's --auth-token decides the tenant, another tenant is
// refused, Status is redacted for tenants, the key quota holds, and SIGHUP
// swaps the tokens.
func TestServeWithAuth(t *testing.T) {
	t.Parallel()
	const acme, ops, rotated = "acme-token-0123456789", "ops-token-0123456789", "acme-rotated-0123456789"
	tokensFile := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, tokensFile, hashLine(t, acme, "--tenant", "acme")+hashLine(t, ops, "--tenant", "ops", "--admin"))
	opsFile := filepath.Join(t.TempDir(), "ops.token")
	writeFile(t, opsFile, ops+"\n")
	s := mustServer(t, "--auth", "--auth-tokens-file", tokensFile, "--tenant-max-keys", "2", "--tenant-claim-rate", "1000")
	id := []string{"--scope", "POST /v1/charges", "--key", "k1"}

	if _, stderr, code := cli(t, append([]string{"get", "--addr", s.grpc}, id...)...); code != exitDenied || !strings.Contains(stderr, "idemnode: not authenticated: ") {
		t.Fatalf("get without a token: exit %d, stderr %q", code, stderr)
	}
	var won claimJSON
	s.cliJSON(0, &won, append([]string{"claim", "--no-fingerprint", "--auth-token", acme}, id...)...)
	var got recordJSON
	s.cliJSON(0, &got, append([]string{"get", "--auth-token", acme, "--tenant", "acme"}, id...)...)
	if won.Outcome != "won" || got.Record == nil || got.Record.Token != won.Token {
		t.Fatalf("claim %+v then get %+v: want acme's record", won, got)
	}
	if _, stderr, code := cli(t, append([]string{"get", "--addr", s.grpc, "--auth-token", acme, "--tenant", "globex"}, id...)...); code != exitDenied ||
		!strings.Contains(stderr, "idemnode: permission denied: ") {
		t.Fatalf("get naming another tenant: exit %d, stderr %q", code, stderr)
	}
	s.cliJSON(0, &won, "claim", "--no-fingerprint", "--auth-token", acme, "--key", "k2")
	if _, stderr, code := cli(t, "claim", "--no-fingerprint", "--addr", s.grpc, "--auth-token", acme, "--key", "k3"); code != exitDenied ||
		!strings.Contains(stderr, "idemnode: quota exceeded: ") || !strings.Contains(stderr, "quota of 2") {
		t.Fatalf("a claim past the key quota: exit %d, stderr %q", code, stderr)
	}

	var tenantView, adminView map[string]any
	s.cliJSON(0, &tenantView, "status", "--auth-token", acme)
	s.cliJSON(0, &adminView, "status", "--auth-token-file", opsFile)
	if _, ok := tenantView["digest"]; ok || adminView["digest"] == "" || tenantView["state"] != "leader" ||
		fmt.Sprint(tenantView["redacted"]) != "[term commit_index applied_index records digest fsm_time cluster_id]" || adminView["redacted"] != nil {
		t.Fatalf("status for a tenant %v, for an admin %v: want the digest for the admin only, the rest redacted for the tenant", tenantView, adminView)
	}
	if stdout, _, code := cli(t, "status", "--addr", s.grpc, "--auth-token", acme); code != exitOK ||
		!strings.Contains(stdout, "state: leader\n") || !strings.Contains(stdout, "records: redacted\n") || !strings.Contains(stdout, "applied_index: redacted\n") {
		t.Fatalf("status in text for a tenant: exit %d\n%s\nwant the state, and records and applied_index redacted", code, stdout)
	}
	if _, stderr, code := cli(t, "members", "--addr", s.grpc, "--auth-token", acme); code != exitDenied || !strings.Contains(stderr, "permission denied") {
		t.Fatalf("members for a tenant: exit %d, stderr %q; want 6, permission denied", code, stderr)
	}

	// Rotate acme's token: the new one works after SIGHUP, the old one stops.
	writeFile(t, tokensFile, hashLine(t, rotated, "--tenant", "acme")+hashLine(t, ops, "--tenant", "ops", "--admin"))
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the rotated token to work", func() bool {
		_, _, code := cli(t, append([]string{"get", "--addr", s.grpc, "--auth-token", rotated}, id...)...)
		return code == 0
	})
	if _, stderr, code := cli(t, append([]string{"get", "--addr", s.grpc, "--auth-token", acme}, id...)...); code != exitDenied ||
		!strings.Contains(stderr, "not authenticated") {
		t.Fatalf("the old token after rotation: exit %d, stderr %q", code, stderr)
	}
	// A broken file on SIGHUP keeps the tokens in use.
	writeFile(t, tokensFile, "not a tokens file\n")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the failed reload in the log", func() bool {
		return strings.Contains(s.log(), "keeping the tokens in use")
	})
	s.cliJSON(0, &got, append([]string{"get", "--auth-token", rotated}, id...)...)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
