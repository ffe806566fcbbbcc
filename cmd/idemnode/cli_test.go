package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testutil"
)

// TestCLIUsageErrors: bad flags and input the server refused as invalid
// exit 2 with a message on stderr, and nothing is stored.
func TestCLIUsageErrors(t *testing.T) {
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
		{"key too long", []string{"claim", "--no-fingerprint", "--addr", s.grpc, "--key", strings.Repeat("k", 256)}, "invalid input: id.key"},
		{"lease too short", []string{"claim", "--no-fingerprint", "--addr", s.grpc, "--key", "k", "--lease", "10ms"}, "lease"},
		{"token missing", []string{"complete", "--addr", s.grpc, "--key", "k"}, "token"},
		{"addr without port", []string{"status", "--addr", s.grpc + ",localhost"}, "want host:port"},
		{"wait not positive", []string{"wait", "--addr", s.grpc, "--key", "k", "--wait", "0s"}, "--wait must be positive"},
		{"serve without data dir", []string{"serve", "--node-id", "x"}, "--data-dir is required"},
		{"memory limit below the store", []string{"serve", "--dev", "--data-dir", t.TempDir(), "--memory-limit", "256MiB"},
			"--memory-limit 256MiB is below the 499MiB a node may hold"},
		{"cache past the memory limit", []string{"serve", "--dev", "--data-dir", t.TempDir(), "--cache-size", "1GiB",
			"--memory-limit", "1GiB"}, "raise --memory-limit or lower those"},
	}
	for _, tc := range usage {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.stderr) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr only", code, stdout, stderr, tc.stderr)
			}
		})
	}
	if stdout, _, _ := cli(t, "get", "--addr", s.grpc, "--key", "k", "-o", "json"); stdout != `{"outcome":"not_found"}`+"\n" {
		t.Errorf("after the refused calls, get prints %q, want not_found", stdout)
	}
}

// TestCLIExitCodeTable runs every outcome of the exit-code table (exit.go)
// through the binary: the answer on stdout, the code scripts branch on.
func TestCLIExitCodeTable(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	limited := mustServer(t, "--tenant-claim-rate", "0.001", "--tenant-claim-burst", "2", "--tenant-max-keys", "1")
	op := func(sub, key string, args ...string) []string {
		return append([]string{sub, "--tenant", "acme", "--scope", "POST /v1/charges", "--key", key}, args...)
	}
	var won claimJSON
	s.cliJSON(exitOK, &won, op("claim", "k", "--fingerprint", "aa", "--owner", "me")...)
	var held claimJSON
	s.cliJSON(exitOK, &held, op("claim", "held", "--fingerprint", "aa")...)
	body := filepath.Join(t.TempDir(), "body")
	writeFile(t, body, "charged")
	token := fmt.Sprint(won.Token)

	rows := []struct {
		name   string
		srv    *server
		args   []string
		code   int
		stdout string // a prefix of the JSON answer, or of the JSON error
	}{
		{"won", s, op("claim", "k", "--fingerprint", "aa", "--owner", "me"), exitOK, `{"outcome":"won","token":` + token},
		{"get of a pending record", s, op("get", "k"), exitOK, `{"outcome":"ok","record":{`},
		{"mismatch", s, op("claim", "k", "--fingerprint", "bb"), exitRefused, `{"outcome":"mismatch"}`},
		{"fenced complete", s, op("complete", "k", "--token", fmt.Sprint(won.Token+1)), exitRefused, `{"outcome":"fenced"}`},
		{"fenced release", s, op("release", "k", "--token", fmt.Sprint(won.Token+1)), exitRefused, `{"outcome":"fenced"}`},
		{"fenced extend", s, op("extend", "k", "--token", fmt.Sprint(won.Token+1)), exitRefused, `{"outcome":"fenced"}`},
		{"in_progress", s, op("claim", "k", "--fingerprint", "aa"), exitHeld, `{"outcome":"in_progress"`},
		{"wait ends still pending", s, op("wait", "k", "--wait", "100ms"), exitHeld, `{"outcome":"in_progress","record":{`},
		{"extend ok", s, op("extend", "k", "--token", token, "--lease", "1m"), exitOK, `{"outcome":"ok"`},
		{"complete ok", s, op("complete", "k", "--token", token, "--status", "201", "--body-file", body), exitOK, `{"outcome":"ok"}`},
		{"complete retried", s, op("complete", "k", "--token", token, "--status", "201", "--body-file", body), exitOK, `{"outcome":"ok"}`},
		{"completed replay", s, op("claim", "k", "--fingerprint", "aa"), exitCompleted, `{"outcome":"completed","token":` + token},
		{"wait on a completed record", s, op("wait", "k", "--wait", "1s"), exitCompleted, `{"outcome":"completed","record":{`},
		{"get of a completed record", s, op("get", "k"), exitOK, `{"outcome":"ok","record":{`},
		{"get not_found", s, op("get", "absent"), exitRefused, `{"outcome":"not_found"}`},
		{"complete not_found", s, op("complete", "absent", "--token", "1"), exitRefused, `{"outcome":"not_found"}`},
		{"release ok", s, op("release", "held", "--token", fmt.Sprint(held.Token)), exitOK, `{"outcome":"ok"}`},
		{"release of an absent key", s, op("release", "held", "--token", fmt.Sprint(held.Token)), exitOK, `{"outcome":"ok"}`},
		{"wait: the record is gone", s, op("wait", "held", "--wait", "1s"), exitRefused, `{"outcome":"not_found"}`},
		{"invalid input", s, op("get", strings.Repeat("k", 256)), exitUsage, `{"error":{"code":"INVALID_ARGUMENT","reason":"INVALID_FIELD",`},
		{"quota: first key", limited, op("claim", "q1", "--no-fingerprint"), exitOK, `{"outcome":"won"`},
		{"quota exceeded", limited, op("claim", "q2", "--no-fingerprint"), exitDenied, `{"error":{"code":"RESOURCE_EXHAUSTED","reason":"QUOTA_EXCEEDED",`},
		{"rate-limited", limited, op("claim", "q3", "--no-fingerprint"), exitRetry, `{"error":{"code":"RESOURCE_EXHAUSTED","reason":"RATE_LIMITED",`},
		{"unreachable", &server{grpc: testutil.FreeAddr(t)}, []string{"status"}, exitRetry, `{"error":{"code":"UNAVAILABLE","reason":"CONNECTION_REFUSED",`},
		// Without a fingerprint a different request under the key would be
		// answered from the record: said, not claimed.
		{"claim without a fingerprint", s, op("claim", "nofp"), exitUsage, `{"error":{"code":"INVALID_ARGUMENT","reason":"USAGE","message":"claim needs --fingerprint`},
		{"claim with --no-fingerprint", s, op("claim", "nofp", "--no-fingerprint"), exitOK, `{"outcome":"won"`},
		{"remove-member of an unknown node", s, []string{"remove-member", "nosuch"}, exitRefused, `{"error":{"code":"NOT_FOUND",`},
	}
	for _, tc := range rows {
		args := append(tc.args, "--addr", tc.srv.grpc, "-o", "json")
		stdout, stderr, code := cli(t, args...)
		if code != tc.code || !strings.HasPrefix(stdout, tc.stdout) || strings.Count(stdout, "\n") != 1 {
			t.Errorf("%s: idemnode %s\nexit %d, stdout %q, stderr %q\nwant exit %d and one line starting %s",
				tc.name, strings.Join(args, " "), code, stdout, stderr, tc.code, tc.stdout)
		}
	}
	// A rate limit is not dodged by asking the next node of --addr.
	if stdout, _, code := cli(t, op("claim", "q4", "--no-fingerprint", "--addr", limited.grpc+","+s.grpc, "-o", "json")...); code != exitRetry || !strings.Contains(stdout, `"RATE_LIMITED"`) {
		t.Errorf("a rate-limited claim with another node in --addr: exit %d, stdout %q; want 5, RATE_LIMITED", code, stdout)
	}
	// Text output says the same, with the same code.
	if stdout, _, code := cli(t, op("claim", "k", "--addr", s.grpc, "--fingerprint", "bb")...); code != exitRefused || stdout != "outcome: mismatch\n" {
		t.Errorf("text mismatch: exit %d, stdout %q", code, stdout)
	}
}

// TestCLIClaimPrintsGeneratedOwner: a claim without --owner says on stderr
// the owner it generated when a retry of this claim may need it (it won,
// or its answer is unknown), so a retry after a timeout gets its claim
// back; a replay or a refusal, which no retry of it changes, says nothing.
func TestCLIClaimPrintsGeneratedOwner(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	stdout, stderr, code := cli(t, "claim", "--no-fingerprint", "--addr", s.grpc, "--key", "k", "-o", "json")
	var won claimJSON
	if err := json.Unmarshal([]byte(stdout), &won); err != nil || code != exitOK || won.Owner == "" {
		t.Fatalf("claim: exit %d, stdout %q (%v)", code, stdout, err)
	}
	if !strings.Contains(stderr, "--owner "+won.Owner) {
		t.Fatalf("claim's stderr %q does not name the generated owner %s", stderr, won.Owner)
	}
	var again claimJSON
	s.cliJSON(exitOK, &again, "claim", "--no-fingerprint", "--key", "k", "--owner", won.Owner)
	if again.Token != won.Token {
		t.Errorf("the claim retried with the printed owner = %+v, want won with token %d", again, won.Token)
	}
	if _, stderr, _ := cli(t, "claim", "--no-fingerprint", "--addr", s.grpc, "--key", "k2", "--owner", "mine"); stderr != "" {
		t.Errorf("a claim with --owner writes %q on stderr, want nothing", stderr)
	}
	// Held elsewhere, then completed: answers of the record, no owner.
	if stdout, stderr, code := cli(t, "claim", "--no-fingerprint", "--addr", s.grpc, "--key", "k", "-o", "json"); code != exitHeld || stderr != "" {
		t.Errorf("in_progress claim: exit %d, stdout %q, stderr %q; want exit 3 and nothing on stderr", code, stdout, stderr)
	}
	s.cliJSON(exitOK, &again, "complete", "--key", "k", "--token", fmt.Sprint(won.Token))
	if stdout, stderr, code := cli(t, "claim", "--no-fingerprint", "--addr", s.grpc, "--key", "k", "-o", "json"); code != exitCompleted || stderr != "" {
		t.Errorf("completed replay: exit %d, stdout %q, stderr %q; want exit 4 and nothing on stderr", code, stdout, stderr)
	}
	// Unavailable: the retry needs the owner.
	stdout, stderr, code = cli(t, "claim", "--no-fingerprint", "--addr", testutil.FreeAddr(t), "--key", "k3", "-o", "json")
	if code != exitRetry || !strings.Contains(stderr, "claim owner ") || !strings.Contains(stderr, "--owner ") {
		t.Errorf("unavailable claim: exit %d, stdout %q, stderr %q; want exit 5 and the generated owner on stderr", code, stdout, stderr)
	}
}

// TestCLITimeoutBoundsWait: --timeout bounds the whole call, a server-side
// wait included (the wait ends in time: the record is still pending, exit
// 3); without --timeout a wait lasts as long as asked.
func TestCLITimeoutBoundsWait(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	var holder claimJSON
	s.cliJSON(exitOK, &holder, "claim", "--no-fingerprint", "--key", "k")
	for _, args := range [][]string{
		{"wait", "--key", "k", "--wait", "20s", "--timeout", "2s"},
		{"claim", "--no-fingerprint", "--key", "k", "--wait", "20s", "--timeout", "2s"},
	} {
		start := time.Now()
		stdout, stderr, code := cli(t, append(args, "--addr", s.grpc, "-o", "json")...)
		if took := time.Since(start); took > 3*time.Second || code != exitHeld || !strings.HasPrefix(stdout, `{"outcome":"in_progress"`) {
			t.Errorf("%v: took %s, exit %d, stdout %q, stderr %q; want in_progress (exit 3) within the 2s timeout", args, took, code, stdout, stderr)
		}
	}
	start := time.Now()
	var wait recordJSON
	s.cliJSON(exitHeld, &wait, "wait", "--key", "k", "--wait", "3s")
	if took := time.Since(start); took < 3*time.Second || wait.Outcome != "in_progress" {
		t.Errorf("wait --wait 3s without --timeout took %s and answered %+v; want the whole wait, then in_progress", took, wait)
	}
}

// TestCLIManyEndpoints: --addr and IDEMNODE_ADDR take several nodes, tried
// in order, so the CLI works while the first is dead; when none answers it
// says so for each, and exits 5.
func TestCLIManyEndpoints(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	dead, dead2 := testutil.FreeAddr(t), testutil.FreeAddr(t)
	stdout, stderr, code := cli(t, "claim", "--no-fingerprint", "--addr", dead+","+s.grpc, "--key", "k", "--owner", "o", "-o", "json")
	if code != exitOK || !strings.HasPrefix(stdout, `{"outcome":"won"`) {
		t.Fatalf("claim with a dead first endpoint: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	cmd := exec.Command(binary, "get", "--key", "k", "-o", "json")
	cmd.Env = append(os.Environ(), "IDEMNODE_ADDR="+dead+" , "+s.grpc)
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), `{"outcome":"ok"`) {
		t.Fatalf("get with IDEMNODE_ADDR=dead,live: %v, stdout %q", err, out)
	}
	stdout, stderr, code = cli(t, "status", "--addr", dead+","+dead2)
	want := fmt.Sprintf("idemnode: connection refused at %s; connection refused at %s\n", dead, dead2)
	if code != exitRetry || stderr != want || stdout != "" {
		t.Errorf("no endpoint answers: exit %d, stdout %q, stderr %q; want exit 5 and %q", code, stdout, stderr, want)
	}
}

// TestCLIErrorsForHumans: failures are said in words, not gRPC's transport
// text, and with -o json as one {"error": …} object on stdout.
func TestCLIErrorsForHumans(t *testing.T) {
	t.Parallel()
	closed := testutil.FreeAddr(t)
	stdout, stderr, code := cli(t, "get", "--addr", closed, "--key", "k", "-o", "json")
	var e struct {
		Error struct{ Code, Reason, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &e); err != nil || code != exitRetry {
		t.Fatalf("exit %d, stdout %q (%v); want exit 5 and a JSON error", code, stdout, err)
	}
	want := "connection refused at " + closed
	if e.Error.Code != "UNAVAILABLE" || e.Error.Reason != "CONNECTION_REFUSED" || e.Error.Message != want || stderr != "idemnode: "+want+"\n" {
		t.Errorf("JSON error %+v, stderr %q; want UNAVAILABLE CONNECTION_REFUSED %q", e.Error, stderr, want)
	}

	// A node waiting for its peers has no leader, and says why.
	dir := t.TempDir()
	lonely := testutil.FreeAddr(t)
	node := exec.Command(binary, "serve", "--node-id", "lonely", "--data-dir", filepath.Join(dir, "data"),
		"--grpc-addr", lonely, "--raft-addr", testutil.FreeAddr(t), "--http-addr", testutil.FreeAddr(t),
		"--gossip-addr", testutil.FreeAddr(t), "--api-addr", "", "--bootstrap-expect", "3", "--insecure")
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
	testutil.Eventually(t, 20*time.Second, "the lonely node to answer status", func() bool {
		_, _, code := cli(t, "status", "--addr", lonely)
		return code == exitOK
	})
	start := time.Now()
	_, stderr, code = cli(t, "claim", "--no-fingerprint", "--addr", lonely, "--key", "k", "--owner", "o", "--timeout", "2s")
	if took := time.Since(start); code != exitRetry || took > 3*time.Second ||
		!strings.Contains(stderr, "no leader: the cluster has not formed yet") {
		t.Errorf("claim without a leader: exit %d after %s, stderr %q; want exit 5 within 2s, saying there is no leader", code, took, stderr)
	}
}

// TestStatusPrintsEveryField: status in text prints every field, zeros
// included, on a node that holds no record yet.
func TestStatusPrintsEveryField(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	stdout, stderr, code := cli(t, "status", "--addr", s.grpc)
	var names []string
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		name, _, _ := strings.Cut(line, ": ")
		names = append(names, name)
	}
	want := "node_id state leader_id leader_addr term commit_index applied_index records digest fsm_time cluster_id"
	if code != exitOK || strings.Join(names, " ") != want || !strings.Contains(stdout, "\nrecords: 0\n") {
		t.Errorf("status: exit %d, stderr %q, stdout:\n%s\nwant the fields %s, with records: 0", code, stderr, stdout, want)
	}
}

// TestGetSaysLeaseLapsed: get of a PENDING record whose lease has run out
// says so (and exits 0: the record exists); a live lease says nothing.
func TestGetSaysLeaseLapsed(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	var won claimJSON
	s.cliJSON(exitOK, &won, "claim", "--no-fingerprint", "--key", "short", "--lease", "1s", "--owner", "o")
	s.cliJSON(exitOK, &won, "claim", "--no-fingerprint", "--key", "long", "--lease", "1m", "--owner", "o")
	testutil.Eventually(t, 10*time.Second, "get to say the lease lapsed", func() bool {
		stdout, _, code := cli(t, "get", "--addr", s.grpc, "--key", "short")
		return code == exitOK && strings.Contains(stdout, "\n  lease_lapsed: true\n") &&
			strings.Contains(stdout, "\nnote: the lease lapsed ") && strings.Contains(stdout, "the next claim takes the key over\n")
	})
	var got struct {
		Record struct {
			LeaseLapsed bool `json:"lease_lapsed"`
		} `json:"record"`
		Note string `json:"note"`
	}
	s.cliJSON(exitOK, &got, "get", "--key", "short")
	if !got.Record.LeaseLapsed || got.Note == "" {
		t.Errorf("get -o json of a lapsed lease = %+v, want lease_lapsed and a note", got)
	}
	if stdout, _, _ := cli(t, "get", "--addr", s.grpc, "--key", "long"); strings.Contains(stdout, "lapsed") {
		t.Errorf("get of a live lease says it lapsed:\n%s", stdout)
	}
}

// TestStatusAndHTTP checks status -o json field by field, the operator
// endpoints, and that SIGTERM stops the server cleanly.
func TestStatusAndHTTP(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	var won claimJSON
	s.cliJSON(0, &won, "claim", "--no-fingerprint", "--key", "k")

	var st map[string]any
	s.cliJSON(0, &st, "status")
	for _, field := range []string{"node_id", "state", "leader_id", "leader_addr", "term", "commit_index",
		"applied_index", "records", "digest", "fsm_time", "cluster_id"} {
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
