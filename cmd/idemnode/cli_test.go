package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// TestCLIExitCodes: usage errors (bad flags, input the server refused as
// invalid) exit 2 with a message on stderr; refused outcomes exit 1 with
// their answer on stdout; a server that cannot be reached exits 1.
func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	usage := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown flag", []string{"claim", "--bogus"}, "unknown flag: --bogus"},
		{"unknown command", []string{"clam"}, "unknown command"},
		{"missing key", []string{"claim", "--addr", s.grpc}, "--key is required"},
		{"bad output format", []string{"claim", "--addr", s.grpc, "--key", "k", "-o", "yaml"}, "-o must be text or json"},
		{"fingerprint not hex", []string{"claim", "--addr", s.grpc, "--key", "k", "--fingerprint", "xyz"}, "--fingerprint is not hex"},
		{"malformed header", []string{"complete", "--addr", s.grpc, "--key", "k", "--token", "1", "--header", "no colon"}, "--header"},
		{"key too long", []string{"claim", "--addr", s.grpc, "--key", strings.Repeat("k", 256)}, "id.key"},
		{"lease too short", []string{"claim", "--addr", s.grpc, "--key", "k", "--lease", "10ms"}, "lease"},
		{"token missing", []string{"complete", "--addr", s.grpc, "--key", "k"}, "token"},
		{"serve without data dir", []string{"serve", "--node-id", "x"}, "--data-dir is required"},
	}
	for _, tc := range usage {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.stderr) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr only", code, stdout, stderr, tc.stderr)
			}
		})
	}
	if stdout, _, _ := cli(t, "get", "--addr", s.grpc, "--key", "k", "-o", "json"); stdout != `{"outcome":"not_found"}`+"\n" {
		t.Errorf("after the refused calls, get prints %q, want not_found", stdout)
	}

	var won claimJSON
	s.cliJSON(0, &won, "claim", "--key", "k", "--fingerprint", "aa")
	refused := []struct {
		name   string
		args   []string
		stdout string
	}{
		{"mismatch", []string{"claim", "--key", "k", "--fingerprint", "bb"}, `{"outcome":"mismatch"}`},
		{"fenced", []string{"complete", "--key", "k", "--token", fmt.Sprint(won.Token + 1)}, `{"outcome":"fenced"}`},
		{"fenced release", []string{"release", "--key", "k", "--token", fmt.Sprint(won.Token + 1)}, `{"outcome":"fenced"}`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, append(tc.args, "--addr", s.grpc, "-o", "json")...)
			if code != 1 || stdout != tc.stdout+"\n" || stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %s on stdout only", code, stdout, stderr, tc.stdout)
			}
		})
	}
	if stdout, _, code := cli(t, "claim", "--addr", s.grpc, "--key", "k", "--fingerprint", "bb"); code != 1 || stdout != "outcome: mismatch\n" {
		t.Errorf("text mismatch: exit %d, stdout %q", code, stdout)
	}

	var ok claimJSON
	s.cliJSON(0, &ok, "complete", "--key", "k", "--token", fmt.Sprint(won.Token))
	if ok.Outcome != "ok" {
		t.Errorf("complete = %+v, want ok", ok)
	}

	closed := testutil.FreeAddr(t)
	if _, stderr, code := cli(t, "status", "--addr", closed, "--timeout", "5s"); code != 1 || !strings.HasPrefix(stderr, "idemnode: ") {
		t.Errorf("unreachable server: exit %d, stderr %q; want exit 1 with a message", code, stderr)
	}
}

// TestCLIClaimWaitOutlastsTimeout: --wait longer than --timeout still gets
// the server's answer at the end of the wait, as the wait subcommand does.
func TestCLIClaimWaitOutlastsTimeout(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	var holder, waiter claimJSON
	s.cliJSON(0, &holder, "claim", "--key", "k")
	s.cliJSON(0, &waiter, "claim", "--key", "k", "--wait", "1s", "--timeout", "500ms")
	if waiter.Outcome != "in_progress" || waiter.Token != 0 {
		t.Errorf("claim whose wait ended = %+v, want in_progress without a token", waiter)
	}
	var wait recordJSON
	s.cliJSON(0, &wait, "wait", "--key", "k", "--wait", "100ms")
	if wait.Outcome != "in_progress" || wait.Record == nil || wait.Record.State != "pending" {
		t.Errorf("wait = %+v, want in_progress with the pending record", wait)
	}
}

// TestStatusAndHTTP checks status -o json field by field, the operator
// endpoints, and that SIGTERM stops the server cleanly.
func TestStatusAndHTTP(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	var won claimJSON
	s.cliJSON(0, &won, "claim", "--key", "k")

	var st map[string]any
	s.cliJSON(0, &st, "status")
	for _, field := range []string{"node_id", "state", "leader_id", "leader_addr", "term", "commit_index",
		"applied_index", "records", "digest", "fsm_time"} {
		if _, ok := st[field]; !ok {
			t.Errorf("status has no %q: %v", field, st)
		}
	}
	want := map[string]any{"node_id": "n1", "state": "leader", "leader_id": "n1", "leader_addr": s.grpc, "records": 1.0}
	for field, v := range want {
		if st[field] != v {
			t.Errorf("status %s = %v, want %v", field, st[field], v)
		}
	}
	term, _ := st["term"].(float64)
	commit, _ := st["commit_index"].(float64)
	applied, _ := st["applied_index"].(float64)
	if term < 1 || applied < 1 || applied > commit {
		t.Errorf("status term %v commit %v applied %v, want term >= 1 and 1 <= applied <= commit", term, commit, applied)
	}
	if d, _ := st["digest"].(string); len(d) != 64 {
		t.Errorf("status digest = %q, want 64 hex digits", d)
	}

	for path, body := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n", "/metrics": "go_goroutines"} {
		resp, err := http.Get("http://" + s.http + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), body) {
			t.Errorf("GET %s = %d %q, want 200 with %q", path, resp.StatusCode, b, body)
		}
	}

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("send SIGTERM: %v", err)
	}
	select {
	case <-s.exited:
		if s.err != nil {
			t.Errorf("server exited with %v after SIGTERM:\n%s", s.err, s.log())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("server still running 20s after SIGTERM:\n%s", s.log())
	}
}
