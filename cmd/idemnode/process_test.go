package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/internal/testmain"
	"github.com/idemnode/idemnode/internal/testutil"
)

// binary is the idemnode executable TestMain builds once for every test.
var binary string

func TestMain(m *testing.M) {
	tb := testmain.New("idemnode")
	// The inner loop (-short) runs no processes: binary stays empty and
	// needBinary skips every test that would run it.
	if !testing.Short() {
		binary = buildBinary(tb)
		// A race-enabled binary sleeps a second at a clean exit by default.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	tb.Close()
	os.Exit(code)
}

// buildBinary builds idemnode (with -race when the tests run with it) into
// a directory tb removes at its Close.
func buildBinary(tb *testmain.TB) string {
	bin := filepath.Join(tb.TempDir(), "idemnode")
	build := exec.Command("go", append(append([]string{"build"}, raceFlag...), "-o", bin, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		tb.Fatalf("go build idemnode: %v", err)
	}
	return bin
}

// server is one `idemnode serve` process on fixed loopback ports, so it can
// be killed and started again on the same data dir and addresses.
type server struct {
	t                        *testing.T
	nodeID                   string // n1 if empty
	dataDir, logPath         string
	grpc, raft, http, gossip string
	// api is the JSON API's address, "" (off) unless a test sets it:
	// every port picked ahead is one more a parallel test may take first.
	api string
	// nofile, when set, limits the process to this many file descriptors
	// (ulimit -n), so a test exhausts them without tens of thousands of
	// connections.
	nofile int
	// serveFlags are added to serve's command line (--insecure, or the TLS
	// flags), clientFlags to cliJSON's.
	serveFlags, clientFlags []string

	// bin is the executable to run; empty runs the one TestMain built.
	bin string

	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	err    error         // Wait's answer, once exited is closed
}

// needBinary skips t under -short, where TestMain builds no binary: the
// inner loop starts no idemnode processes.
func needBinary(t testing.TB) {
	t.Helper()
	if binary == "" {
		t.Skip("-short: runs the idemnode binary as a process")
	}
}

// mustServer starts a fresh single-node plaintext server, with args added
// to its serve flags, and waits until it is ready. t.Cleanup kills it and
// reports any data race it logged.
func mustServer(t *testing.T, args ...string) *server {
	t.Helper()
	return mustServerWith(t, append([]string{"--insecure"}, args...), nil)
}

// mustServerWith is mustServer with the given serve and client flags.
func mustServerWith(t *testing.T, serveFlags, clientFlags []string) *server {
	t.Helper()
	// FreeAddr's ports are free when picked, not when the server binds
	// them: another process's connection can take one in between. A start
	// refused for that gets fresh ports and a fresh data dir.
	for attempt := 1; ; attempt++ {
		s := newServer(t, serveFlags, clientFlags)
		s.launch()
		err := s.awaitReady()
		if err == nil {
			return s
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("start %d: a port was taken after it was picked; again on fresh ports", attempt)
	}
}

// newServer prepares a server on fresh addresses, to be started; t.Cleanup
// kills it and reports any data race it logged.
func newServer(t *testing.T, serveFlags, clientFlags []string) *server {
	t.Helper()
	needBinary(t)
	dir := t.TempDir()
	s := &server{t: t, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "server.log"),
		grpc: testutil.FreeAddr(t), raft: testutil.FreeAddr(t), http: testutil.FreeAddr(t), gossip: testutil.FreeAddr(t),
		serveFlags: serveFlags, clientFlags: clientFlags}
	t.Cleanup(func() {
		s.kill()
		if log, _ := os.ReadFile(s.logPath); bytes.Contains(log, []byte("WARNING: DATA RACE")) {
			t.Errorf("the server logged a data race:\n%s", log)
		}
	})
	return s
}

// start runs the process and waits until it is ready.
func (s *server) start() {
	s.t.Helper()
	s.launch()
	s.waitReady()
}

// launch runs the process.
func (s *server) launch() {
	s.t.Helper()
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatalf("open server log: %v", err)
	}
	defer logFile.Close()
	args := append([]string{cmp.Or(s.bin, binary), "serve", "--node-id", cmp.Or(s.nodeID, "n1"), "--data-dir", s.dataDir,
		"--grpc-addr", s.grpc, "--raft-addr", s.raft, "--http-addr", s.http, "--gossip-addr", s.gossip, "--api-addr", s.api}, s.serveFlags...)
	if s.nofile > 0 {
		args = append([]string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, s.nofile), "sh"}, args...)
	}
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start server: %v", err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		s.err = cmd.Wait()
		close(exited)
	}(s.cmd, s.exited)
}

// waitReady waits for /readyz; it fails the test with the server's log if
// the process exits or is not ready within 60s (a race build forming a
// cluster while the whole suite runs can take more than 30s).
func (s *server) waitReady() {
	s.t.Helper()
	if err := s.awaitReady(); err != nil {
		s.t.Fatal(err)
	}
}

// awaitReady is waitReady's wait, which says why the server did not start.
func (s *server) awaitReady() error {
	deadline := time.Now().Add(60 * time.Second)
	for !s.ready() {
		select {
		case <-s.exited:
			return fmt.Errorf("server exited while starting (%v):\n%s", s.err, s.log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server was not ready within 60s:\n%s", s.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (s *server) ready() bool {
	resp, err := http.Get("http://" + s.http + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *server) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// kill sends SIGKILL, as a crash would, and waits for the process to go.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// restart kills the server with SIGKILL and starts it again on the same
// data dir and addresses.
func (s *server) restart() {
	s.t.Helper()
	s.kill()
	s.start()
}

// cli runs the binary with args and returns its stdout, stderr and exit code.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return cliIn(t, "", args...)
}

// cliIn is cli with stdin.
func cliIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return cliEnv(t, nil, stdin, args...)
}

// cliEnv is cliIn with the environment env (nil: this process's).
func cliEnv(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	needBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = strings.NewReader(stdin), &out, &errOut, env
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run idemnode %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// cliJSON runs a client subcommand against s with -o json, requires exit
// code want, and decodes stdout into v.
func (s *server) cliJSON(want int, v any, args ...string) {
	s.t.Helper()
	args = append(append(args, "--addr", s.grpc, "-o", "json"), s.clientFlags...)
	stdout, stderr, code := cli(s.t, args...)
	if code != want {
		s.t.Fatalf("idemnode %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		s.t.Fatalf("idemnode %s: stdout is not JSON (%v): %q", strings.Join(args, " "), err, stdout)
	}
}

// The JSON the CLI prints, spelled out here so that a renamed field fails.
type claimJSON struct {
	Outcome  string        `json:"outcome"`
	Token    uint64        `json:"token"`
	Attempt  uint32        `json:"attempt"`
	Owner    string        `json:"owner"`
	Response *responseJSON `json:"response"`
	// RecoveryPoint is set on a takeover of a record with a checkpoint.
	RecoveryPoint *struct {
		Name       string `json:"name"`
		Data       string `json:"data"`
		DataBase64 string `json:"data_base64"`
	} `json:"recovery_point"`
}

type responseJSON struct {
	Status     int32        `json:"status"`
	Headers    []headerJSON `json:"headers"`
	Body       string       `json:"body"`
	BodyBase64 string       `json:"body_base64"`
}

type headerJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type recordJSON struct {
	Outcome string `json:"outcome"`
	Record  *struct {
		Key      string        `json:"key"`
		State    string        `json:"state"`
		Token    uint64        `json:"token"`
		Attempt  uint32        `json:"attempt"`
		Response *responseJSON `json:"response"`
	} `json:"record"`
}

// TestRecordsSurviveKill crashes the server with SIGKILL after a claim and
// after a completion: the claim's token and the stored response, with its
// repeated headers in order and its non-UTF-8 body, come back byte for byte.
func TestRecordsSurviveKill(t *testing.T) {
	t.Parallel()
	s := mustServer(t)
	id := []string{"--tenant", "acme", "--scope", "POST /v1/charges", "--key", "order-42"}
	with := func(args ...string) []string { return append(append([]string{}, args...), id...) }

	var won claimJSON
	s.cliJSON(0, &won, with("claim", "--fingerprint", "c0ffee")...)
	if won.Outcome != "won" || won.Token == 0 || won.Attempt != 1 || won.Owner == "" {
		t.Fatalf("claim = %+v, want won with a token and an owner", won)
	}

	s.restart()
	var got recordJSON
	s.cliJSON(0, &got, with("get")...)
	if got.Outcome != "ok" || got.Record == nil || got.Record.State != "pending" || got.Record.Token != won.Token {
		t.Fatalf("get after kill = %+v, want the pending record with token %d", got, won.Token)
	}
	var retried claimJSON
	s.cliJSON(0, &retried, with("claim", "--fingerprint", "c0ffee", "--owner", won.Owner)...)
	if retried.Outcome != "won" || retried.Token != won.Token {
		t.Fatalf("retried claim after kill = %+v, want won with token %d", retried, won.Token)
	}

	body := []byte{0xff, 0xfe, 0x00, 0x80, 'o', 'k', '\n', 0xc3}
	bodyFile := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(bodyFile, body, 0o600); err != nil {
		t.Fatal(err)
	}
	var done claimJSON
	s.cliJSON(0, &done, with("complete", "--token", fmt.Sprint(won.Token), "--status", "201",
		"--header", "A: 1", "--header", "B: x", "--header", "A: 2", "--body-file", bodyFile)...)
	if done.Outcome != "ok" {
		t.Fatalf("complete = %+v, want ok", done)
	}

	s.restart()
	var replay claimJSON
	s.cliJSON(exitCompleted, &replay, with("claim", "--fingerprint", "c0ffee")...)
	if replay.Outcome != "completed" || replay.Token != won.Token || replay.Response == nil {
		t.Fatalf("claim after completion and kill = %+v, want completed with token %d", replay, won.Token)
	}
	r := replay.Response
	wantHeaders := []headerJSON{{"A", "1"}, {"B", "x"}, {"A", "2"}}
	if r.Status != 201 || fmt.Sprint(r.Headers) != fmt.Sprint(wantHeaders) {
		t.Errorf("replayed status %d headers %v, want 201 %v", r.Status, r.Headers, wantHeaders)
	}
	if b, err := base64.StdEncoding.DecodeString(r.BodyBase64); err != nil || !bytes.Equal(b, body) {
		t.Errorf("replayed body_base64 %q decodes to %q (%v), want %q", r.BodyBase64, b, err, body)
	}
	if r.Body != "" {
		t.Errorf("a body that is not UTF-8 is also printed as text: %q", r.Body)
	}
	var mismatch claimJSON
	s.cliJSON(1, &mismatch, with("claim", "--fingerprint", "beef")...)
	if mismatch.Outcome != "mismatch" {
		t.Errorf("claim with another fingerprint after kill = %+v, want mismatch", mismatch)
	}
}
