package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/idemnode/idemnode/internal/testcluster"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// TestAgainstCluster runs idembench against an in-process 3-node cluster:
// every mode briefly, then the checkers against planted bugs.
func TestAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs every benchmark mode against a 3-node cluster")
	}
	c := testcluster.Start(t, 3, testcluster.Options{})
	var addrs []string
	for _, nd := range c.Nodes {
		addrs = append(addrs, nd.GRPCAddr())
	}
	for _, mode := range []string{modeClaim, modeComplete, modeRace} {
		t.Run(mode, func(t *testing.T) { testMode(t, addrs, mode) })
	}
	t.Run("verify catches a wrong winner", func(t *testing.T) { testVerify(t, c.Nodes[1].Client()) })
	t.Run("preflight catches a broken server", func(t *testing.T) { testPreflightCatches(t, c.Nodes[0].Client()) })
}

func testMode(t *testing.T, addrs []string, mode string) {
	cfg := config{addrs: addrs, conns: 2, clients: 8, duration: 2 * time.Second, warmup: 500 * time.Millisecond, lease: lease,
		mode: mode, raceGroup: 4, timeout: 5 * time.Second, verifyMax: 2000, preflight: true, pids: []int{os.Getpid()}}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.human())
	if res.Target != "idemnode" || res.Requests == 0 || res.OpsPerSec <= 0 || res.P50 <= 0 || res.P999 < res.P50 || res.Max < res.P999 {
		t.Fatalf("implausible result: %+v", res)
	}
	if res.Errors+res.UnexpectedLost+res.CASFailed+res.RaceViolations+res.RaceIndeterminate != 0 {
		t.Fatalf("anomalies against a healthy cluster: %+v", res)
	}
	if !strings.HasPrefix(res.Preflight, "preflight ok") || !strings.Contains(res.Notes, "3 nodes") {
		t.Fatalf("preflight %q, notes %q", res.Preflight, res.Notes)
	}
	// The servers are in this process, so -pids of ourselves must show CPU.
	if res.CPU.ServerCores <= 0 || res.CPU.PerPID[strconv.Itoa(os.Getpid())+"/"+procName(t)] <= 0 {
		t.Fatalf("cpu of -pids not measured: %+v", res.CPU)
	}
	switch mode {
	case modeComplete:
		if d := res.StoreOpsPS - 2*res.OpsPerSec; d > 0.5 || d < -0.5 {
			t.Fatalf("claim+complete is 2 store ops per request: %+v", res)
		}
		if res.ClaimP50 <= 0 || res.CompleteP50 <= 0 || res.ClaimP50 > res.P50 {
			t.Fatalf("claim/complete halves: %+v", res)
		}
	case modeRace:
		if res.RaceKeys == 0 || res.RaceVerified == 0 || res.RaceVerifyBad != 0 || res.Requests != 4*res.RaceKeys {
			t.Fatalf("race bookkeeping: %+v", res)
		}
	}
}

func procName(t *testing.T) string {
	name, _, ok := procCPU(os.Getpid())
	if !ok {
		t.Fatal("cannot read /proc/self/stat")
	}
	return name
}

// testVerify stores one claim and checks that the read-back accepts its
// real winner and flags a different fingerprint or token.
func testVerify(t *testing.T, c idempb.IdempotencyClient) {
	ctx := context.Background()
	key := runPrefix() + "verify"
	res, err := c.Claim(ctx, claimRequest(key, fingerprint(key, 3), "verify-owner"))
	if err != nil || res.GetOutcome() != idempb.Outcome_OUTCOME_WON {
		t.Fatalf("claim: %v %v", res.GetOutcome(), err)
	}
	tok := res.GetToken()
	for _, tc := range []struct {
		name string
		win  raceWin
		bad  int
	}{
		{"the winner", raceWin{key, fingerprint(key, 3), tok}, 0},
		{"another fingerprint", raceWin{key, fingerprint(key, 4), tok}, 1},
		{"another token", raceWin{key, fingerprint(key, 3), tok + 1}, 1},
		{"a key nobody claimed", raceWin{key + "-none", fingerprint(key, 3), tok}, 1},
	} {
		checked, bad := verifyRace(ctx, c, []raceWin{tc.win}, 10)
		if checked != 1 || bad != tc.bad {
			t.Errorf("%s: checked %d bad %d, want 1 and %d", tc.name, checked, bad, tc.bad)
		}
	}
}

// brokenServer plants one semantic bug in front of a real node.
type brokenServer struct {
	idempb.IdempotencyClient
	bug  string
	wins map[string]int // owner -> WON answers seen
}

func (b brokenServer) Complete(ctx context.Context, req *idempb.CompleteRequest, opts ...grpc.CallOption) (*idempb.CompleteResponse, error) {
	res, err := b.IdempotencyClient.Complete(ctx, req, opts...)
	if b.bug == "no fencing" && res.GetOutcome() == idempb.Outcome_OUTCOME_FENCED {
		return &idempb.CompleteResponse{Outcome: idempb.Outcome_OUTCOME_OK}, err
	}
	return res, err
}

func (b brokenServer) Claim(ctx context.Context, req *idempb.ClaimRequest, opts ...grpc.CallOption) (*idempb.ClaimResponse, error) {
	res, err := b.IdempotencyClient.Claim(ctx, req, opts...)
	if b.bug == "replay loses the body" && res.GetOutcome() == idempb.Outcome_OUTCOME_COMPLETED {
		res.Response.Body = res.Response.Body[1:]
	}
	if res.GetOutcome() == idempb.Outcome_OUTCOME_WON {
		b.wins[req.GetOwner()]++
		if b.bug == "retry gets a new token" && b.wins[req.GetOwner()] > 1 {
			res.Token++
		}
	}
	return res, err
}

func testPreflightCatches(t *testing.T, c idempb.IdempotencyClient) {
	if _, err := preflight(context.Background(), c, runPrefix()); err != nil {
		t.Fatalf("preflight of the real server: %v", err)
	}
	for bug, want := range map[string]string{
		"no fencing":             "complete with a wrong token",
		"replay loses the body":  "preflight replay",
		"retry gets a new token": "retried claim",
	} {
		_, err := preflight(context.Background(), brokenServer{c, bug, map[string]int{}}, runPrefix())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: preflight error %v, want one about %q", bug, err, want)
		}
	}
}
