package idempg_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/contrib/idempg"
	"github.com/idemnode/idemnode/internal/testutil"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// A holder process is this test binary started again with holderEnv set to
// one of the modes below; it runs Runner.Do on the keys it is given and
// stops at the mode's point, printing "ready <key>", until a line arrives on
// its stdin. The test freezes it there with SIGSTOP (a goroutine cannot be
// frozen), or the process kills itself with SIGKILL.
const (
	holderEnv = "IDEMPG_HOLDER"
	// stopAtClaim: between the claim and the transaction's first statement.
	stopAtClaim = "stop-at-claim"
	// stopInFn: inside the function, after the fence row is inserted.
	stopInFn = "stop-in-fn"
	// stopInFnPartitioned: as stopInFn, and every lease extension is lost,
	// so the process does not learn that its lease ran out and commits
	// when it resumes.
	stopInFnPartitioned = "stop-in-fn-partitioned"
	// killAfterCommit: after COMMIT, before Complete reaches idemnode.
	killAfterCommit = "kill-after-commit"
)

// holderMain is the holder process. It prints "result <key> <body>" for
// every key whose Do (retried once after an error) returned a response.
func holderMain(mode string) int {
	keys := strings.Split(os.Getenv("IDEMPG_KEYS"), ",")
	gate := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		close(gate)
	}()
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var completes sync.WaitGroup
	completes.Add(len(keys))
	hook := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch {
		case mode == stopAtClaim && method == idempb.Idempotency_Claim_FullMethodName:
			err := invoker(ctx, method, req, reply, cc, opts...)
			if r, ok := reply.(*idempb.ClaimResponse); ok && err == nil && r.GetOutcome() == idempb.Outcome_OUTCOME_WON {
				say("ready %s", req.(*idempb.ClaimRequest).GetId().GetKey())
				<-gate
			}
			return err
		case mode == killAfterCommit && method == idempb.Idempotency_Complete_FullMethodName:
			say("ready %s", req.(*idempb.CompleteRequest).GetId().GetKey())
			completes.Done()
			// Every key has committed: die before any Complete is sent.
			completes.Wait()
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		case mode == stopInFnPartitioned && method == idempb.Idempotency_Extend_FullMethodName:
			return status.Error(codes.Unavailable, "test: Extend dropped")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cl, err := client.New(client.Config{Addrs: strings.Split(os.Getenv("IDEMPG_ADDRS"), ","), Lease: time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(hook)}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer cl.Close()
	db, err := sql.Open("pgx", os.Getenv("IDEMPG_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer db.Close()
	r, err := idempg.New(db, cl, idempg.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fn := effect(fmt.Sprintf("process %d", os.Getpid()))
	if mode == stopInFn || mode == stopInFnPartitioned {
		inner := fn
		fn = func(ctx context.Context, tx *sql.Tx) (client.Response, error) {
			resp, err := inner(ctx, tx)
			run, _ := client.RunFrom(ctx)
			say("ready %s", run.ID().Key)
			<-gate
			return resp, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Do(ctx, testID(k), fingerprint, fn)
			if err != nil {
				// What a caller does: try again, and get the key's response.
				say("error %s %v", k, strings.ReplaceAll(err.Error(), "\n", "; "))
				res, err = r.Do(ctx, testID(k), fingerprint, fn, client.WithWait(20*time.Second))
			}
			if err != nil {
				say("error %s %v", k, strings.ReplaceAll(err.Error(), "\n", "; "))
				return
			}
			say("result %s %s", k, base64.StdEncoding.EncodeToString(res.Response.Body))
		}()
	}
	wg.Wait()
	return 0
}

// holder is a running holder process.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan error
}

func startHolder(t *testing.T, e *env, mode, dsn string, keys []string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+mode, "IDEMPG_DSN="+dsn,
		"IDEMPG_ADDRS="+strings.Join(addrs(e.cluster), ","), "IDEMPG_KEYS="+strings.Join(keys, ","))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin, lines: make(chan string, 4*len(keys)), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		h.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
	})
	return h
}

// awaitReady waits for n "ready" lines.
func (h *holder) awaitReady(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for n > 0 {
		select {
		case l, ok := <-h.lines:
			if !ok {
				t.Fatalf("holder process ended before it was ready: %v", <-h.done)
			}
			if strings.HasPrefix(l, "ready ") {
				n--
			} else {
				t.Logf("holder: %s", l)
			}
		case <-timeout:
			t.Fatalf("holder process: %d keys not ready after 60s", n)
		}
	}
}

// results lets the frozen holder go on and collects what it printed until it
// exits.
func (h *holder) results(t *testing.T) map[string]string {
	t.Helper()
	h.cmd.Process.Signal(syscall.SIGCONT)
	io.WriteString(h.stdin, "go\n")
	out := map[string]string{}
	for l := range h.lines {
		f := strings.SplitN(l, " ", 3)
		switch {
		case len(f) == 3 && f[0] == "result":
			b, err := base64.StdEncoding.DecodeString(f[2])
			if err != nil {
				t.Fatal(err)
			}
			out[f[1]] = string(b)
		default:
			t.Logf("holder: %s", l)
		}
	}
	if err := <-h.done; err != nil {
		t.Fatalf("holder process: %v", err)
	}
	return out
}

// takeOver runs every key through the test's own runner, waiting for the
// frozen or dead holder's lease to run out.
func takeOver(t *testing.T, e *env, keys []string) map[string]idempg.Result {
	t.Helper()
	out, errs := takeOverAll(e, keys)
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// takeOverAll is takeOver returning its errors, for a goroutine other than
// the test's.
func takeOverAll(e *env, keys []string) (map[string]idempg.Result, []error) {
	var (
		mu   sync.Mutex
		out  = map[string]idempg.Result{}
		errs []error
		wg   sync.WaitGroup
	)
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			res, err := e.r.Do(ctx, testID(k), fingerprint, effect("takeover"), client.WithWait(30*time.Second))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("takeover of %s: %w", k, err))
				return
			}
			out[k] = res
		}()
	}
	wg.Wait()
	return out, errs
}

func holderKeys(mode string, n int) []string {
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("%s-%d", mode, i))
	}
	return keys
}

// TestHolderFrozenBeforeFence: a holder process is frozen with SIGSTOP
// between its claim and its transaction, past its lease. Another holder
// takes every key over and commits. When the frozen process wakes, the
// database refuses it: its INSERT finds the committed rows, it does not run
// the function, and it returns the committed responses.
func TestHolderFrozenBeforeFence(t *testing.T) {
	e := newEnv(t)
	frozenTakeover(t, e, stopAtClaim, e.dsn)
}

// TestHolderFrozenInTransactionIdleTimeout: a holder process is frozen with
// SIGSTOP inside the function, its fence row inserted and its transaction
// open. PostgreSQL ends its idle transaction (the process's connections set
// idle_in_transaction_session_timeout), so the takeover runs while the
// process is still frozen; when it wakes, its transaction is gone and its
// retry gets the takeover's response. This shows the timeout's part; the
// fence's is TestHolderFrozenInTransactionResumes.
func TestHolderFrozenInTransactionIdleTimeout(t *testing.T) {
	e := newEnv(t)
	frozenTakeover(t, e, stopInFn, e.dsn+" idle_in_transaction_session_timeout=1500")
}

// TestHolderFrozenInTransactionResumes: a holder process is frozen with
// SIGSTOP inside the function, past its lease, with no idle timeout and its
// extensions lost (it will not learn the lease is gone). Another holder
// takes every key over; its fence waits on the frozen transaction's row.
// The process resumes and commits: the takeover must not run the function,
// and replays the frozen holder's response.
func TestHolderFrozenInTransactionResumes(t *testing.T) {
	e := newEnv(t)
	keys := holderKeys(stopInFnPartitioned, 8)
	h := startHolder(t, e, stopInFnPartitioned, e.dsn, keys)
	h.awaitReady(t, len(keys))
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var (
		taken    map[string]idempg.Result
		errs     []error
		tookOver = make(chan struct{})
	)
	go func() {
		defer close(tookOver)
		taken, errs = takeOverAll(e, keys)
	}()
	testutil.Eventually(t, 30*time.Second, "every takeover's fence waiting on the frozen transactions", func() error {
		var n int
		err := e.db.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO%idempg_effects%'").Scan(&n)
		if err == nil && n != len(keys) {
			err = fmt.Errorf("%d of %d waiting", n, len(keys))
		}
		return err
	})
	stale := h.results(t)
	<-tookOver
	for _, err := range errs {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, k := range keys {
		if !taken[k].Replayed || taken[k].Executed || !strings.Contains(string(taken[k].Response.Body), "by process") {
			t.Errorf("takeover of %s: executed %v, replayed %v, %q; want the resumed holder's commit replayed",
				k, taken[k].Executed, taken[k].Replayed, taken[k].Response.Body)
		}
		got[k] = []string{string(taken[k].Response.Body), stale[k]}
	}
	checkEffects(t, e.db, got)
}

// frozenTakeover freezes a holder process of 8 keys at mode's point, takes
// every key over while it is frozen, lets it go on, and checks the effects
// and the responses of both.
func frozenTakeover(t *testing.T, e *env, mode, dsn string) {
	t.Helper()
	keys := holderKeys(mode, 8)
	h := startHolder(t, e, mode, dsn, keys)
	h.awaitReady(t, len(keys))
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	taken := takeOver(t, e, keys)
	stale := h.results(t)
	got := map[string][]string{}
	for _, k := range keys {
		if !taken[k].Executed {
			t.Errorf("takeover of %s: %+v; want it to run the function", k, taken[k])
		}
		got[k] = []string{string(taken[k].Response.Body), stale[k]}
	}
	checkEffects(t, e.db, got)
}

// TestHolderKilledAfterCommit: a holder process commits every key and is
// killed with SIGKILL before any Complete reaches idemnode. The next holder
// finds each committed row and completes the key with it, without running
// the function again.
func TestHolderKilledAfterCommit(t *testing.T) {
	e := newEnv(t)
	keys := holderKeys(killAfterCommit, 8)
	h := startHolder(t, e, killAfterCommit, e.dsn, keys)
	h.awaitReady(t, len(keys))
	for range h.lines {
	}
	var exit *exec.ExitError
	if err := <-h.done; !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("holder process: %v; want killed by SIGKILL", err)
	}
	taken := takeOver(t, e, keys)
	got := map[string][]string{}
	for _, k := range keys {
		if !taken[k].Replayed || !strings.Contains(string(taken[k].Response.Body), "by process") {
			t.Errorf("takeover of %s: executed %v, replayed %v, %q; want the dead process's committed response replayed",
				k, taken[k].Executed, taken[k].Replayed, taken[k].Response.Body)
		}
		got[k] = []string{string(taken[k].Response.Body)}
	}
	checkEffects(t, e.db, got)
}
