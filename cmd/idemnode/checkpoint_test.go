package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// TestCheckpointCLI: a holder records a step from a file; bad input exits
// 2 and stores nothing; a stale token exits 1; after the lease runs out,
// claim -o json prints the recovery point the new holder resumes from.
func TestCheckpointCLI(t *testing.T) {
	t.Parallel()
	s := mustServer(t, "--min-lease", "100ms")
	var won struct {
		claimJSON
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	// The lease leaves room for the checkpoints below: each CLI call is a
	// process of its own, slow under the race detector on a loaded machine.
	s.cliJSON(0, &won, "claim", "--key", "ride", "--fingerprint", "aa", "--owner", "driver-1", "--lease", "1s")
	token := strconv.FormatUint(won.Token, 10)
	data := filepath.Join(t.TempDir(), "charge.json")
	if err := os.WriteFile(data, []byte(`{"charge":"ch_1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Outcome string `json:"outcome"`
	}
	s.cliJSON(0, &out, "checkpoint", "--key", "ride", "--token", token, "--point", "charged", "--data-file", data)
	s.cliJSON(0, &out, "checkpoint", "--key", "ride", "--token", token, "--point", "charged", "--data-file", data)
	s.cliJSON(exitRefused, &out, "checkpoint", "--key", "ride", "--token", token, "--point", "charged")
	if out.Outcome != "mismatch" {
		t.Fatalf("the same point with other data: %q", out.Outcome)
	}
	s.cliJSON(exitRefused, &out, "checkpoint", "--key", "ride", "--token", token+"1", "--point", "charged")
	if out.Outcome != "fenced" {
		t.Fatalf("another token: %q", out.Outcome)
	}
	for _, bad := range [][]string{
		{"--point", "two words"},
		{},
		{"--point", "p", "--data-file", filepath.Join(t.TempDir(), "missing")},
	} {
		args := append([]string{"checkpoint", "--addr", s.grpc, "--key", "ride", "--token", token}, bad...)
		if _, stderr, code := cli(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("checkpoint %v: exit %d, stderr %q; want %d and a message", bad, code, stderr, exitUsage)
		}
	}

	// The holder's lease runs out. A process cannot take a fake clock, but
	// it shares the machine's with the test: wait for the end the claim was
	// told, not a fixed sleep with a margin past it. (TestCheckpointOverTheAPI
	// in rpc/ checks the same takeover on a fake clock.)
	if left := time.Until(won.LeaseExpiresAt); left > 0 {
		time.Sleep(left + time.Millisecond)
	}
	var taken claimJSON
	s.cliJSON(0, &taken, "claim", "--key", "ride", "--fingerprint", "aa", "--owner", "driver-2")
	if p := taken.RecoveryPoint; taken.Attempt != 2 || p == nil || p.Name != "charged" || p.Data != `{"charge":"ch_1"}` {
		t.Fatalf("takeover: %+v, point %+v", taken, p)
	}
	stdout, _, _ := cli(t, "get", "--addr", s.grpc, "--key", "ride")
	if !strings.Contains(stdout, "recovery_point:") || !strings.Contains(stdout, "name: charged") {
		t.Errorf("get does not show the recovery point:\n%s", stdout)
	}
}

// TestTombstoneCLI: a late claim of a completed key exits 1 with outcome
// expired; a bad --tombstone-ttl is a usage error.
func TestTombstoneCLI(t *testing.T) {
	t.Parallel()
	s := mustServer(t, "--min-ttl", "100ms", "--min-lease", "100ms", "--tombstone-ttl", "1h")
	var won claimJSON
	// The TTL leaves room for the complete: each CLI call is a process of
	// its own, slow under the race detector on a loaded machine.
	s.cliJSON(0, &won, "claim", "--key", "paid", "--fingerprint", "aa", "--owner", "o1", "--ttl", "2s", "--lease", "1s")
	var out struct {
		Outcome string `json:"outcome"`
	}
	s.cliJSON(0, &out, "complete", "--key", "paid", "--token", strconv.FormatUint(won.Token, 10))
	// Until the TTL ends, a retry is answered from the record; after it,
	// from the tombstone, never as a fresh claim.
	retry := []string{"claim", "--key", "paid", "--fingerprint", "aa", "--owner", "o2", "--addr", s.grpc, "-o", "json"}
	retry = append(retry, s.clientFlags...)
	var stdout string
	var code int
	testutil.Eventually(t, 20*time.Second, "a retry past the TTL not answered from the record", func() error {
		if stdout, _, code = cli(t, retry...); code == exitCompleted {
			return fmt.Errorf("exit %d, answered from the record: %s", code, stdout)
		}
		return nil
	})
	var late claimJSON
	if err := json.Unmarshal([]byte(stdout), &late); err != nil || code != exitRefused || late.Outcome != "expired" {
		t.Fatalf("late claim: exit %d (want %d), %q", code, exitRefused, stdout)
	}
	if _, stderr, code := cli(t, "serve", "--dev", "--tombstone-ttl", "-1s"); code != exitUsage || !strings.Contains(stderr, "--tombstone-ttl") {
		t.Errorf("serve --tombstone-ttl -1s: exit %d, stderr %q", code, stderr)
	}
}
