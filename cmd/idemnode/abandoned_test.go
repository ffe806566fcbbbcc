package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The JSON lines and list `abandoned` prints, spelled out so that a
// renamed field fails.
type feedEventJSON struct {
	Seq           uint64 `json:"seq"`
	Kind          string `json:"kind"`
	Resolution    string `json:"resolution"`
	ResolvesSeq   uint64 `json:"resolves_seq"`
	Key           string `json:"key"`
	Token         uint64 `json:"token"`
	Attempt       uint32 `json:"attempt"`
	RecoveryPoint string `json:"recovery_point"`
}

// watchCLI runs `abandoned --watch -o json` and hands over its lines.
type watchCLI struct {
	cmd   *exec.Cmd
	lines chan feedEventJSON
}

func startWatch(t *testing.T, s *server, args ...string) *watchCLI {
	t.Helper()
	needBinary(t)
	args = append(append([]string{"abandoned", "--watch", "--addr", s.grpc, "-o", "json"}, args...), s.clientFlags...)
	cmd := exec.Command(binary, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchCLI{cmd: cmd, lines: make(chan feedEventJSON, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev feedEventJSON
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("watch printed %q: %v", sc.Text(), err)
				continue
			}
			w.lines <- ev
		}
		close(w.lines)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return w
}

func (w *watchCLI) next(t *testing.T) feedEventJSON {
	t.Helper()
	select {
	case ev, ok := <-w.lines:
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no event from the watch in 15 s")
	}
	return feedEventJSON{}
}

// stop interrupts the watch, which exits 0.
func (w *watchCLI) stop(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("the watch exited with %v on SIGINT, want 0", err)
	}
}

// TestAbandonedCLI: a claim whose lease lapses is listed and watched as
// abandoned, its completion arrives as resolved, and a watch restarted with
// --after the last seq printed repeats nothing; bad flags exit 2.
func TestAbandonedCLI(t *testing.T) {
	t.Parallel()
	s := mustServer(t, "--min-lease", "100ms")
	watch := startWatch(t, s)
	var won claimJSON
	// The lease leaves room for the checkpoint (a process of its own, slow
	// under the race detector) before the record is marked with its point.
	s.cliJSON(0, &won, "claim", "--key", "ride", "--fingerprint", "aa", "--owner", "driver-1", "--lease", "2s")
	token := strconv.FormatUint(won.Token, 10)
	var cp struct{ Outcome string }
	s.cliJSON(0, &cp, "checkpoint", "--key", "ride", "--token", token, "--point", "charged")

	ev := watch.next(t)
	if ev.Kind != "abandoned" || ev.Key != "ride" || ev.Token != won.Token || ev.Attempt != 1 || ev.RecoveryPoint != "charged" {
		t.Fatalf("watched %+v", ev)
	}
	var list struct {
		Abandoned []feedEventJSON `json:"abandoned"`
	}
	s.cliJSON(0, &list, "abandoned")
	if len(list.Abandoned) != 1 || list.Abandoned[0].Seq != ev.Seq {
		t.Fatalf("abandoned now: %+v", list.Abandoned)
	}

	var done struct{ Outcome string }
	s.cliJSON(0, &done, "complete", "--key", "ride", "--token", token, "--status", "201")
	resolved := watch.next(t)
	if resolved.Kind != "resolved" || resolved.Resolution != "completed" || resolved.ResolvesSeq != ev.Seq || resolved.Seq != ev.Seq+1 {
		t.Fatalf("watched %+v after the completion", resolved)
	}
	watch.stop(t)
	s.cliJSON(0, &list, "abandoned")
	if len(list.Abandoned) != 0 {
		t.Fatalf("abandoned after the completion: %+v", list.Abandoned)
	}

	again := startWatch(t, s, "--after", strconv.FormatUint(ev.Seq, 10))
	if got := again.next(t); got.Seq != resolved.Seq {
		t.Fatalf("a watch after %d starts with %+v", ev.Seq, got)
	}
	again.stop(t)

	for _, bad := range [][]string{
		{"--all-tenants", "--tenant", "acme"},
		{"--tenant", "two words"},
		{"-o", "yaml"},
	} {
		args := append([]string{"abandoned", "--addr", s.grpc}, bad...)
		if _, stderr, code := cli(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("abandoned %v: exit %d, stderr %q; want %d and a message", bad, code, stderr, exitUsage)
		}
	}
}

// TestAbandonedCursorAheadCLI: --after past the cluster's last event (a
// cursor kept from before the cluster was restored from an older backup)
// ends `abandoned`, with --watch or without, with exit 7 and a message
// that names the feed's last event and what to do, instead of a watch
// that waits forever; with -o json the error object says
// FEED_CURSOR_AHEAD.
func TestAbandonedCursorAheadCLI(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	for _, args := range [][]string{{"--watch"}, nil} {
		args = append(append([]string{"abandoned", "--addr", s.grpc, "--after", "18446744073709551615"}, args...), s.clientFlags...)
		_, stderr, code := cli(t, args...)
		if code != exitCursorAhead || !strings.Contains(stderr, "last event is 0") || !strings.Contains(stderr, "--after 0") {
			t.Fatalf("idemnode %s: exit %d, stderr %q; want %d naming the last event and --after 0", strings.Join(args, " "), code, stderr, exitCursorAhead)
		}
		stdout, _, code := cli(t, append(args, "-o", "json")...)
		var out struct {
			Error struct{ Code, Reason, Message string }
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != exitCursorAhead ||
			out.Error.Code != "OUT_OF_RANGE" || out.Error.Reason != "FEED_CURSOR_AHEAD" {
			t.Fatalf("idemnode %s -o json: exit %d, %q (%v)", strings.Join(args, " "), code, stdout, err)
		}
	}
}
