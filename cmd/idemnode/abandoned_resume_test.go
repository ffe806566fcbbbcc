package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAbandonedWatchResumesAfterRestart: `abandoned --watch` outlives its
// node's crash and restart: it says on stderr after which seq it resumes,
// then goes on with the next event, repeating none.
func TestAbandonedWatchResumesAfterRestart(t *testing.T) {
	t.Parallel()
	s := mustServer(t, "--min-lease", "100ms")
	cmd := exec.Command(binary, append([]string{"abandoned", "--watch", "--addr", s.grpc, "-o", "json"}, s.clientFlags...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	events, said := make(chan feedEventJSON, 16), make(chan string, 64)
	go func() {
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			var ev feedEventJSON
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("watch printed %q: %v", sc.Text(), err)
			}
			events <- ev
		}
	}()
	go func() {
		for sc := bufio.NewScanner(stderr); sc.Scan(); {
			said <- sc.Text()
		}
	}()
	next := func(what string) feedEventJSON {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s from the watch in 30 s", what)
		}
		return feedEventJSON{}
	}
	abandon := func(key string) {
		t.Helper()
		var won claimJSON
		s.cliJSON(0, &won, "claim", "--key", key, "--fingerprint", "aa", "--lease", "100ms")
	}

	abandon("before")
	first := next("event before the restart")
	if first.Kind != "abandoned" || first.Key != "before" {
		t.Fatalf("watched %+v", first)
	}
	s.restart()
	want := "resuming after seq " + strconv.FormatUint(first.Seq, 10)
	deadline := time.After(30 * time.Second)
	for resumed := false; !resumed; {
		select {
		case line := <-said:
			resumed = strings.HasPrefix(line, "idemnode: ") && strings.HasSuffix(line, want)
			if !resumed {
				t.Logf("stderr: %s", line)
			}
		case <-deadline:
			t.Fatalf("the watch did not say %q on stderr within 30 s", want)
		}
	}
	abandon("after")
	if ev := next("event after the restart"); ev.Key != "after" || ev.Seq != first.Seq+1 {
		t.Fatalf("after the restart the watch printed %+v, want the abandonment of after as seq %d", ev, first.Seq+1)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the watch exited with %v on SIGINT, want 0", err)
	}
}
