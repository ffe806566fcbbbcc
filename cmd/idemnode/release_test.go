package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestReleaseHasNoFaultFlags: the binary `go build ./cmd/idemnode` makes
// (TestMain's, built without tags) has no fault-injection flag, so a
// mistyped deployment flag cannot make a node deliberately incorrect; only
// a fault build (`-tags faults`, the jepsen harness's) has them.
func TestReleaseHasNoFaultFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		// No --data-dir: a binary that took the flag stops at once too.
		{"serve", "--fault-bug", "skip-fencing"},
		{"serve", "--fault-bug", "applied-ahead"},
		{"serve", "--fault-clock-offset", "1h"},
		{"serve", "--fault-disk-stall-file", "stall"},
	} {
		_, stderr, code := cli(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "unknown flag: "+args[1]) {
			t.Errorf("idemnode %s: exit %d, stderr %q; want %d and unknown flag", strings.Join(args, " "), code, stderr, exitUsage)
		}
	}
}

// TestReleaseHasNoPlantedBug: the release binary carries none of the
// planted bugs' code (their names and messages say "planted bug").
func TestReleaseHasNoPlantedBug(t *testing.T) {
	t.Parallel()
	needBinary(t)
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	// ASCII case folding keeps offsets (bytes.ToLower would widen the
	// binary's invalid UTF-8).
	lower := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	if i := bytes.Index(lower, []byte("planted bug")); i >= 0 {
		t.Errorf("the release binary holds %q at byte %d", b[i:min(len(b), i+60)], i)
	}
}
